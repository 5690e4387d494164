-- The W3C traceparent of the request that submitted a workload: its later lifecycle events (placed,
-- running, migrating, ended) are emitted by the placer and the consumers under that trace.
ALTER TABLE workloads ADD COLUMN IF NOT EXISTS traceparent text;
