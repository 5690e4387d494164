-- Telemetry's own tables: which workload holds which GPU (from the scheduler's events, to label
-- samples and scope tenants), and the per-GPU rollups (history, idle detection, prediction).

CREATE TABLE IF NOT EXISTS allocations (
    placement_id text        NOT NULL,
    gpu_uuid     text        NOT NULL,
    workload_id  text        NOT NULL,
    tenant_id    text        NOT NULL,
    node         text        NOT NULL,
    placed_at    timestamptz NOT NULL,
    PRIMARY KEY (placement_id, gpu_uuid)
);
CREATE INDEX IF NOT EXISTS allocations_workload ON allocations (workload_id);

CREATE TABLE IF NOT EXISTS rollups (
    gpu_uuid     text        NOT NULL,
    window_start timestamptz NOT NULL,
    window_s     real        NOT NULL,
    node         text        NOT NULL,
    model        text        NOT NULL DEFAULT '',
    samples      integer     NOT NULL,
    workload_id  text,
    tenant_id    text,
    -- {metric: {"avg": .., "max": .., "p95": ..}} for the rolled-up metrics (see rollup.py)
    stats        jsonb       NOT NULL,
    PRIMARY KEY (gpu_uuid, window_start)
);
CREATE INDEX IF NOT EXISTS rollups_window ON rollups (window_start);
