-- Every charge names the events behind it, and time lost to a platform fault is credited.
-- Rows written before this migration keep their invented source keys and have no event ids (NULL).

-- An entry is a charge (or the reversal of one) or an SLA credit; each records the events that opened and
-- closed its interval (a charge: the placement's running event and the event that ended it, known when
-- the line is posted at the end; a credit: the incident's opened event and the new placement's running).
ALTER TABLE journal_entries ADD COLUMN kind text NOT NULL DEFAULT 'charge'
    CHECK (kind IN ('charge', 'credit'));
ALTER TABLE journal_entries ADD COLUMN opened_by_event_id text;
ALTER TABLE journal_entries ADD COLUMN closed_by_event_id text;
ALTER TABLE journal_entries ADD COLUMN incident_id text;
CREATE INDEX journal_entries_workload ON journal_entries (workload_id);

-- The events that placed, started and ended each allocation's billed interval.
ALTER TABLE allocations ADD COLUMN running_event_id text;
ALTER TABLE allocations ADD COLUMN ended_event_id text;

-- Which agent event a host fact came from (a start, or the last step of a migration).
ALTER TABLE host_facts ADD COLUMN event_type text;

-- SLA policies per tenant (admin); a tenant without one has the configured default.
CREATE TABLE sla_policies (
    tenant_id         text PRIMARY KEY,
    fault_classes     text[]      NOT NULL,
    credit_rate       numeric     NOT NULL CHECK (credit_rate >= 0),
    monthly_cap_micro bigint      NOT NULL CHECK (monthly_cap_micro >= 0),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- Recovery's incidents as billing learned them (recovery.events): what failed, where, and when detected.
CREATE TABLE incidents (
    incident_id     text PRIMARY KEY,
    fault_type      text        NOT NULL,
    node            text        NOT NULL,
    gpu_uuid        text,
    severity        text        NOT NULL,
    detected_at     timestamptz NOT NULL,
    opened_event_id text        NOT NULL,
    outcome         text,
    closed_at       timestamptz,
    closed_event_id text
);

-- The scheduler's moves (WorkloadMigratingV1), with the incident that caused them.
CREATE TABLE workload_moves (
    event_id          text PRIMARY KEY,
    workload_id       text        NOT NULL,
    tenant_id         text        NOT NULL,
    from_placement_id text        NOT NULL,
    to_placement_id   text        NOT NULL,
    incident_id       text,
    reason            text        NOT NULL,
    at                timestamptz NOT NULL
);
CREATE INDEX workload_moves_to ON workload_moves (to_placement_id);
CREATE INDEX workload_moves_from ON workload_moves (from_placement_id);
CREATE INDEX workload_moves_incident ON workload_moves (incident_id);

-- One decision per (incident, workload): credited or not, and why. Append-only, like the ledger.
CREATE TABLE sla_credits (
    incident_id        text        NOT NULL,
    workload_id        text        NOT NULL,
    tenant_id          text        NOT NULL,
    project            text        NOT NULL,
    from_placement_id  text        NOT NULL,
    to_placement_id    text        NOT NULL,
    fault_type         text        NOT NULL,
    fault_class        text        NOT NULL,
    detected_at        timestamptz NOT NULL,
    running_at         timestamptz NOT NULL,
    eligible           boolean     NOT NULL,
    reason             text        NOT NULL,
    credit_rate        numeric     NOT NULL,
    lost_micro         bigint      NOT NULL,
    amount_micro       bigint      NOT NULL CHECK (amount_micro >= 0),
    capped             boolean     NOT NULL,
    entry_id           text,
    opened_event_id    text        NOT NULL,
    migrating_event_id text        NOT NULL,
    running_event_id   text        NOT NULL,
    PRIMARY KEY (incident_id, workload_id)
);
CREATE INDEX sla_credits_tenant ON sla_credits (tenant_id, running_at);
CREATE INDEX sla_credits_workload ON sla_credits (workload_id);
CREATE TRIGGER sla_credits_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON sla_credits
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
