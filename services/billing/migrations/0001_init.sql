-- Billing: prices, allocations and their lifecycle facts, the append-only double-entry ledger,
-- budgets, tag policies, idle state and export schedules. Money is bigint micro-currency.

-- Price versions: the newest effective_from in force wins; a change is a new row, never an edit.
CREATE TABLE prices (
    price_id       text PRIMARY KEY,
    gpu_model      text        NOT NULL,
    mig_profile    text,
    share_of       integer,
    pricing_class  text        NOT NULL CHECK (pricing_class IN ('on_demand', 'spot', 'reserved')),
    basis          text        NOT NULL CHECK (basis IN ('compute_unit_hour', 'gpu_hour')),
    micro_per_hour bigint      NOT NULL CHECK (micro_per_hour >= 0),
    effective_from timestamptz NOT NULL,
    effective_to   timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE NULLS NOT DISTINCT (gpu_model, mig_profile, share_of, pricing_class, effective_from)
);

-- Default list, per compute-unit-hour (1 unit = 1/8 A100, so a GPU's hourly price is its units times
-- this). Spot is 60% and reserved 70% of on-demand. 'default' prices models missing from the list.
INSERT INTO prices (price_id, gpu_model, pricing_class, basis, micro_per_hour, effective_from)
SELECT 'seed:' || m.model || ':' || c.cls, m.model, c.cls, 'compute_unit_hour',
       m.od * c.pct / 100, timestamptz '2000-01-01 00:00:00+00'
FROM (VALUES ('A100-80GB', 500000), ('A100-40GB', 450000), ('H100-80GB-SXM', 600000),
             ('H100-80GB-PCIe', 550000), ('H200-141GB', 650000), ('L40S', 450000),
             ('L4', 400000), ('A10', 400000), ('T4', 350000), ('default', 650000)) AS m (model, od)
CROSS JOIN (VALUES ('on_demand', 100), ('spot', 60), ('reserved', 70)) AS c (cls, pct);

-- One row per (placement, priced resource); rated_until is how far charges have been posted.
CREATE TABLE allocations (
    allocation_id  text PRIMARY KEY,
    placement_id   text        NOT NULL,
    workload_id    text        NOT NULL,
    tenant_id      text        NOT NULL,
    project        text        NOT NULL,
    kind           text        NOT NULL,
    gpu_model      text        NOT NULL,
    mig_profile    text,
    share_of       integer,
    pricing_class  text        NOT NULL,
    compute_units  numeric     NOT NULL,
    gpus           numeric     NOT NULL,
    tags           jsonb       NOT NULL DEFAULT '{}',
    started_at     timestamptz NOT NULL,
    ended_at       timestamptz,
    end_reason     text,
    rated_until    timestamptz NOT NULL,
    status         text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed'))
);
CREATE INDEX allocations_placement ON allocations (placement_id);
CREATE INDEX allocations_open ON allocations (rated_until) WHERE status = 'open';
CREATE INDEX allocations_workload ON allocations (workload_id);

-- The lifecycle facts as received (placed / ended), the input of reconciliation. Append-only.
CREATE TABLE lifecycle_facts (
    fact_id      bigserial PRIMARY KEY,
    event_id     text        NOT NULL,
    kind         text        NOT NULL CHECK (kind IN ('placed', 'ended')),
    placement_id text        NOT NULL,
    at           timestamptz NOT NULL,
    end_reason   text,
    UNIQUE (placement_id, kind, event_id)
);

CREATE TABLE journal_entries (
    entry_id          text PRIMARY KEY,
    source_event_id   text        NOT NULL UNIQUE,
    at                timestamptz NOT NULL,
    tenant_id         text        NOT NULL,
    project           text        NOT NULL,
    description       text        NOT NULL,
    reverses_entry_id text UNIQUE REFERENCES journal_entries (entry_id),
    allocation_id     text        NOT NULL,
    workload_id       text        NOT NULL,
    resource          text        NOT NULL,
    pricing_class     text        NOT NULL,
    period_start      timestamptz NOT NULL,
    period_end        timestamptz NOT NULL,
    basis             text        NOT NULL,
    quantity_hours    numeric     NOT NULL,
    compute_unit_hours numeric    NOT NULL,  -- negative on a reversal
    price_id          text        NOT NULL,
    micro_per_hour    bigint      NOT NULL,
    amount_micro      bigint      NOT NULL,  -- change of the receivable; negative on a reversal
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX journal_entries_project_at ON journal_entries (tenant_id, project, at);
CREATE INDEX journal_entries_allocation ON journal_entries (allocation_id, period_end);

CREATE TABLE postings (
    posting_id   bigserial PRIMARY KEY,
    entry_id     text        NOT NULL,  -- references journal_entries, checked by postings_balanced
    account      text        NOT NULL,
    debit_micro  bigint      NOT NULL DEFAULT 0 CHECK (debit_micro >= 0),
    credit_micro bigint      NOT NULL DEFAULT 0 CHECK (credit_micro >= 0),
    tenant_id    text        NOT NULL,
    project      text        NOT NULL,
    at           timestamptz NOT NULL,
    CHECK (debit_micro = 0 OR credit_micro = 0)
);
CREATE INDEX postings_project_at ON postings (tenant_id, project, at, posting_id);
CREATE INDEX postings_entry ON postings (entry_id);

-- Append-only, enforced by the database: no UPDATE, DELETE or TRUNCATE of ledger rows, whoever asks.
CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is append-only: % on % is refused; post a reversing entry', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER postings_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON postings
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER journal_entries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON journal_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER lifecycle_facts_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON lifecycle_facts
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();

-- Every entry's postings arrive in one statement, must balance and must name an existing entry
-- (checked once per statement: a row-level foreign key costs more than the insert itself).
CREATE FUNCTION postings_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE bad text;
BEGIN
    SELECT entry_id INTO bad FROM new_postings GROUP BY entry_id
    HAVING sum(debit_micro) <> sum(credit_micro) OR count(*) < 2 LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'journal entry % is not balanced', bad USING ERRCODE = 'check_violation';
    END IF;
    SELECT n.entry_id INTO bad FROM new_postings n
    WHERE NOT EXISTS (SELECT 1 FROM journal_entries e WHERE e.entry_id = n.entry_id) LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'posting for unknown journal entry %', bad USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER postings_balanced AFTER INSERT ON postings REFERENCING NEW TABLE AS new_postings
    FOR EACH STATEMENT EXECUTE FUNCTION postings_balanced();

CREATE TABLE budgets (
    tenant_id   text        NOT NULL,
    project     text        NOT NULL,
    limit_micro bigint      NOT NULL CHECK (limit_micro > 0),
    thresholds  integer[]   NOT NULL,
    hard_stop   boolean     NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, project)
);

CREATE TABLE budget_state (
    tenant_id   text    NOT NULL,
    project     text    NOT NULL,
    month       text    NOT NULL,
    spent_micro bigint  NOT NULL DEFAULT 0,
    crossed     integer[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, project, month)
);

CREATE TABLE tenant_tags (
    tenant_id text PRIMARY KEY,
    tags      jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE tag_policies (
    tenant_id text PRIMARY KEY,
    required  text[] NOT NULL
);

CREATE TABLE tag_violations (
    workload_id  text        NOT NULL,
    placement_id text        NOT NULL,
    tenant_id    text        NOT NULL,
    missing      text[]      NOT NULL,
    flagged_at   timestamptz NOT NULL,
    PRIMARY KEY (workload_id, placement_id)
);
CREATE INDEX tag_violations_tenant ON tag_violations (tenant_id);

CREATE TABLE idle_state (
    workload_id          text PRIMARY KEY,
    tenant_id            text NOT NULL,
    idle_since           timestamptz,
    observed_until       timestamptz,
    warned_at            timestamptz,
    release_requested_at timestamptz
);

CREATE TABLE idle_actions (
    workload_id text        NOT NULL,
    tenant_id   text        NOT NULL,
    stage       text        NOT NULL,
    idle_hours  double precision NOT NULL,
    at          timestamptz NOT NULL,
    PRIMARY KEY (workload_id, stage, at)
);

CREATE TABLE export_schedules (
    tenant_id  text NOT NULL,
    project    text NOT NULL,
    format     text NOT NULL CHECK (format IN ('csv', 'jsonl', 'parquet')),
    first_day  date NOT NULL,
    PRIMARY KEY (tenant_id, project, format)
);

CREATE TABLE export_runs (
    tenant_id    text        NOT NULL,
    project      text        NOT NULL,
    format       text        NOT NULL,
    day          date        NOT NULL,
    path         text        NOT NULL,
    rows         bigint      NOT NULL,
    debit_micro  bigint      NOT NULL,
    credit_micro bigint      NOT NULL,
    written_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, project, format, day)
);
