-- Rule names are unique per owner, not across the service: two tenants may each have a rule named
-- `HighTemp`, and neither learns of the other's from a 409. NULL (a global rule) counts as one owner.
-- Every existing row stays valid: names were unique across the service, so they are unique per owner.
ALTER TABLE rules DROP CONSTRAINT IF EXISTS rules_pkey;
CREATE UNIQUE INDEX IF NOT EXISTS rules_name_per_owner ON rules (name, owner_tenant) NULLS NOT DISTINCT;
