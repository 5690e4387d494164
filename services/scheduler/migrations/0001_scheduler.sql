-- The scheduler's own state: workloads, placements and the slots they hold, the GPU view learnt from
-- inventory events, tenant shares, quotas and decayed usage, project budget stops and creation drafts.

CREATE TABLE IF NOT EXISTS workloads (
    workload_id     text PRIMARY KEY,
    tenant_id       text             NOT NULL,
    kind            text             NOT NULL,
    state           text             NOT NULL,
    spec            jsonb            NOT NULL,
    urgency         double precision NOT NULL,
    preemptible     boolean          NOT NULL,
    tags            jsonb            NOT NULL DEFAULT '{}',
    submitted_at    timestamptz      NOT NULL,
    priority        double precision NOT NULL DEFAULT 0,
    -- Recovery keeps a migrating workload's priority: the pass uses it instead of recomputing.
    pinned_priority double precision,
    avoid_gpus      jsonb            NOT NULL DEFAULT '[]',
    wait_reason     text,
    position        integer,
    estimated_start timestamptz,
    placement_id    text,
    ended_at        timestamptz,
    outcome         text,
    reason          text             NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS workloads_by_tenant ON workloads (tenant_id, submitted_at);
CREATE INDEX IF NOT EXISTS workloads_waiting ON workloads (submitted_at) WHERE state IN ('queued', 'migrating');

CREATE TABLE IF NOT EXISTS placements (
    placement_id     text PRIMARY KEY,
    workload_id      text             NOT NULL REFERENCES workloads (workload_id),
    tenant_id        text             NOT NULL,
    node             text             NOT NULL,
    grants           jsonb            NOT NULL,
    gpus             integer          NOT NULL,
    units_milli      bigint           NOT NULL,
    models           jsonb            NOT NULL DEFAULT '[]',
    priority         double precision NOT NULL,
    preemptible      boolean          NOT NULL,
    ends_at          timestamptz,
    preempt_deadline timestamptz,
    preempted_for    text,
    migrating        boolean          NOT NULL DEFAULT false,
    placed_at        timestamptz      NOT NULL,
    started_at       timestamptz,
    ended_at         timestamptz,
    outcome          text,
    quota_released   boolean          NOT NULL DEFAULT false
);
-- At most one live placement per workload, whoever tries to place it: the fence against a double placer.
CREATE UNIQUE INDEX IF NOT EXISTS placements_one_live ON placements (workload_id) WHERE ended_at IS NULL;
CREATE INDEX IF NOT EXISTS placements_unreleased ON placements (placement_id)
    WHERE ended_at IS NOT NULL AND NOT quota_released;
CREATE INDEX IF NOT EXISTS placements_history ON placements (tenant_id, ended_at) WHERE ended_at IS NOT NULL;

-- Slots held by live placements; the primary key makes a double-allocated GPU slot impossible.
CREATE TABLE IF NOT EXISTS held_slots (
    gpu_uuid     text NOT NULL,
    slot         text NOT NULL,
    placement_id text NOT NULL REFERENCES placements (placement_id),
    PRIMARY KEY (gpu_uuid, slot)
);
CREATE INDEX IF NOT EXISTS held_slots_by_placement ON held_slots (placement_id);

CREATE TABLE IF NOT EXISTS gpus (
    gpu_uuid         text PRIMARY KEY,
    node             text        NOT NULL,
    model            text        NOT NULL,
    memory_bytes     bigint      NOT NULL,
    units            numeric     NOT NULL,
    health           text        NOT NULL,
    labels           jsonb       NOT NULL DEFAULT '{}',
    mig_enabled      boolean     NOT NULL DEFAULT false,
    time_slice_ratio integer     NOT NULL DEFAULT 1,
    partitions       jsonb       NOT NULL DEFAULT '[]',
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS tenant_shares (
    tenant_id  text PRIMARY KEY,
    shares     double precision NOT NULL CHECK (shares > 0),
    updated_at timestamptz      NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS tenant_quotas (
    tenant_id   text PRIMARY KEY,
    gpus        integer,
    units_milli bigint,
    workloads   integer,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS tenant_usage (
    tenant_id          text PRIMARY KEY,
    decayed_unit_hours double precision NOT NULL,
    as_of              timestamptz      NOT NULL
);

CREATE TABLE IF NOT EXISTS budget_stops (
    tenant_id  text NOT NULL,
    project    text NOT NULL,
    month      text NOT NULL,
    reason     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, project, month)
);

CREATE TABLE IF NOT EXISTS drafts (
    draft_id     text PRIMARY KEY,
    tenant_id    text        NOT NULL,
    body         jsonb       NOT NULL,
    workload_id  text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
