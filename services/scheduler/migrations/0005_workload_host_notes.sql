-- The host's notes about the current placement's run, one line each, from its start report (memory not
-- isolated on a time-sliced share without MPS, restarted from the start after a migration, the limits
-- enforced or why not); NULL before the run started or for a workload placed since, like host_pid.
ALTER TABLE workloads ADD COLUMN IF NOT EXISTS host_notes text[];
