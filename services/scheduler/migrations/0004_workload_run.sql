-- What a workload runs (image resolved from the catalog at submission, command, args, env, working
-- directory, host limits; NULL for a workload submitted before), and the host's facts about the current
-- placement's run: its process or container once started, how it exited (kept after a cancel ended it).
ALTER TABLE workloads
    ADD COLUMN IF NOT EXISTS run_spec jsonb,
    ADD COLUMN IF NOT EXISTS host_pid integer,
    ADD COLUMN IF NOT EXISTS host_container_id text,
    ADD COLUMN IF NOT EXISTS host_runner text,
    ADD COLUMN IF NOT EXISTS exit_reason text,
    ADD COLUMN IF NOT EXISTS exit_code integer,
    ADD COLUMN IF NOT EXISTS exit_signal integer;
