-- The inventory's own tables: the node aggregate (nodes, GPUs, partitions), GPU health history
-- and the allocation ledger applied from the scheduler's events.

CREATE TABLE IF NOT EXISTS nodes (
    hostname   text PRIMARY KEY,
    zone       text        NOT NULL,
    region     text        NOT NULL,
    pool       text        NOT NULL,
    edge       boolean     NOT NULL DEFAULT false,
    status     text        NOT NULL DEFAULT 'ready',
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS gpus (
    uuid             text PRIMARY KEY,
    node             text        NOT NULL REFERENCES nodes (hostname),
    idx              integer     NOT NULL,
    model            text        NOT NULL,
    memory_mib       integer     NOT NULL,
    pci_bus_id       text        NOT NULL,
    nvlink_peers     text[]      NOT NULL DEFAULT '{}',
    mig_enabled      boolean     NOT NULL DEFAULT false,
    health           text        NOT NULL DEFAULT 'healthy',
    units            numeric     NOT NULL,
    -- The whole GPU's units, or the sum of its partitions': what capacity views count.
    capacity_units   numeric     NOT NULL,
    ts_ratio         integer,
    ts_workload_kind text,
    ts_warnings      text[]      NOT NULL DEFAULT '{}',
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS gpus_node ON gpus (node);

CREATE TABLE IF NOT EXISTS partitions (
    id         text PRIMARY KEY,
    gpu_uuid   text    NOT NULL REFERENCES gpus (uuid) ON DELETE CASCADE,
    kind       text    NOT NULL,
    profile    text,
    start      integer,
    ratio      integer,
    share      integer,
    units      numeric NOT NULL,
    memory_mib integer NOT NULL
);
CREATE INDEX IF NOT EXISTS partitions_gpu ON partitions (gpu_uuid);

CREATE TABLE IF NOT EXISTS health_history (
    id         bigserial PRIMARY KEY,
    gpu_uuid   text        NOT NULL,
    action     text        NOT NULL,
    from_state text        NOT NULL,
    to_state   text        NOT NULL,
    reason     text        NOT NULL,
    source     text        NOT NULL,
    at         timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS health_history_gpu ON health_history (gpu_uuid, at);

-- One row per (placement, GPU, partition); the id makes a replayed placement a no-op.
CREATE TABLE IF NOT EXISTS allocations (
    allocation_id text PRIMARY KEY,
    placement_id  text        NOT NULL,
    workload_id   text        NOT NULL,
    tenant_id     text        NOT NULL,
    gpu_uuid      text        NOT NULL,
    partition_id  text,
    units         numeric     NOT NULL,
    memory_mib    integer     NOT NULL,
    released      boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL,
    released_at   timestamptz
);
CREATE INDEX IF NOT EXISTS allocations_live ON allocations (gpu_uuid) WHERE NOT released;
CREATE INDEX IF NOT EXISTS allocations_placement ON allocations (placement_id);

-- Placements already ended, even if their allocation never arrived: a late placement stays dead.
CREATE TABLE IF NOT EXISTS released_placements (
    placement_id text PRIMARY KEY,
    released_at  timestamptz NOT NULL
);
