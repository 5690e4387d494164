-- Job arrays (POST /v1/workload-arrays): one request's answer, in item order, kept so that a retry with the
-- same Idempotency-Key (client_key) and the same body (body_sha256: of its bytes) is answered again
-- without inserting, and a reuse with another body is refused. The unique key is the fence against a
-- concurrent duplicate: the second request's insert waits for the first's commit, then conflicts.
CREATE TABLE IF NOT EXISTS workload_arrays (
    array_id       text PRIMARY KEY,
    tenant_id      text               NOT NULL,
    client_key     text,
    body_sha256    text               NOT NULL,
    workload_ids   text[]             NOT NULL,
    priorities     double precision[] NOT NULL,
    -- The queue position the first item was given; item i was given first_position + i.
    first_position integer            NOT NULL,
    submitted_at   timestamptz        NOT NULL,
    UNIQUE (tenant_id, client_key)
);

-- Which array a workload came from, and its index there (NULL for a workload submitted alone).
ALTER TABLE workloads
    ADD COLUMN IF NOT EXISTS array_id text,
    ADD COLUMN IF NOT EXISTS array_index integer;
CREATE INDEX IF NOT EXISTS workloads_by_array ON workloads (array_id, array_index) WHERE array_id IS NOT NULL;
