-- Charges follow what the host reports: an allocation is held from its placement but charged only from
-- the host's running fact (WorkloadRunningV1.started_at) to its end. Rows opened before this migration
-- were charged from their placement and stay so (running = true); new ones open not running.
ALTER TABLE allocations ADD COLUMN running boolean NOT NULL DEFAULT true;
ALTER TABLE allocations ALTER COLUMN running SET DEFAULT false;
DROP INDEX allocations_open;
CREATE INDEX allocations_due ON allocations (rated_until) WHERE status = 'open' AND running;

-- Billing's own lifecycle facts now include the running one (the start of charging).
ALTER TABLE lifecycle_facts DROP CONSTRAINT lifecycle_facts_kind_check;
ALTER TABLE lifecycle_facts ADD CONSTRAINT lifecycle_facts_kind_check
    CHECK (kind IN ('placed', 'running', 'ended'));

-- The hosts' own facts, read by billing from the node agent's topic (not through the scheduler): when a
-- placement started running and when its process exited. Reconciliation checks the ledger against them.
-- A fact re-sent (an agent restarted, a redelivery) is kept once. Append-only.
CREATE TABLE host_facts (
    fact_id      bigserial PRIMARY KEY,
    kind         text        NOT NULL CHECK (kind IN ('running', 'exited')),
    workload_id  text        NOT NULL,
    tenant_id    text        NOT NULL,
    placement_id text        NOT NULL,
    node         text        NOT NULL,
    at           timestamptz NOT NULL,
    outcome      text,
    event_id     text        NOT NULL,
    UNIQUE (placement_id, kind, at)
);
CREATE INDEX host_facts_workload ON host_facts (workload_id);
CREATE TRIGGER host_facts_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON host_facts
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
