-- Inhibition rules as configuration, not only code: one stored set per owner (a tenant, or NULL for the
-- global set). No global row means the shipped defaults (domain/inhibition.py DEFAULT_INHIBIT_RULES) apply.
CREATE TABLE IF NOT EXISTS inhibit_rules (
    owner_tenant text,
    rules        jsonb       NOT NULL,   -- a list of InhibitRule, tenant rules stored already confined
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS inhibit_rules_one_set_per_owner ON inhibit_rules (owner_tenant)
    NULLS NOT DISTINCT;
