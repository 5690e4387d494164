-- Incidents: the domain object as JSONB, plus the columns queries filter and sort on.
CREATE TABLE incidents (
    incident_id   text PRIMARY KEY,
    state         text NOT NULL,
    fault_type    text NOT NULL,
    gpu_uuid      text,
    node          text NOT NULL,
    tenants       text[] NOT NULL DEFAULT '{}',
    fault_at      timestamptz NOT NULL,
    detected_at   timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL,
    recovered_at  timestamptz,
    closed_at     timestamptz,
    -- Health check (simulated fleet): passes at this instant unless a new fault arrives first.
    settle_until  timestamptz,
    doc           jsonb NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX incidents_open_state ON incidents (state, detected_at) WHERE closed_at IS NULL;
CREATE INDEX incidents_gpu ON incidents (gpu_uuid, last_seen DESC);
CREATE INDEX incidents_node ON incidents (node, last_seen DESC);
CREATE INDEX incidents_fault_type ON incidents (fault_type, fault_at);
CREATE INDEX incidents_fault_at ON incidents (fault_at);
CREATE INDEX incidents_tenants ON incidents USING gin (tenants);
CREATE INDEX incidents_settle ON incidents (settle_until) WHERE state = 'verifying';

-- Which workloads each incident moves (for progress reports keyed by workload).
CREATE TABLE incident_workloads (
    incident_id  text NOT NULL REFERENCES incidents (incident_id),
    workload_id  text NOT NULL,
    tenant_id    text,
    PRIMARY KEY (incident_id, workload_id)
);
CREATE INDEX incident_workloads_workload ON incident_workloads (workload_id);

-- The placement map, from the scheduler's events: which workloads run on which GPUs.
CREATE TABLE placements (
    workload_id   text PRIMARY KEY,
    tenant_id     text NOT NULL,
    placement_id  text NOT NULL,
    node          text NOT NULL,
    gpus          text[] NOT NULL,
    priority      double precision NOT NULL DEFAULT 0,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX placements_gpus ON placements USING gin (gpus);
CREATE INDEX placements_node ON placements (node);

-- GPU health as inventory reports it (drain confirmations; which GPUs a node return must cover).
CREATE TABLE gpu_health (
    gpu_uuid    text PRIMARY KEY,
    node        text NOT NULL,
    health      text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gpu_health_node ON gpu_health (node);
