-- Each GPU row carries the fleet version its last change was written under. The version is bumped in
-- the same statement, under the fleet_version row's lock held to commit, so versions follow commit order:
-- a placer that holds the view of version V reads only the rows changed since (version > V), not every
-- GPU again, while a burst of registrations goes on. Rows from before this column read as version 0.
ALTER TABLE gpus ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS gpus_version ON gpus (version);
