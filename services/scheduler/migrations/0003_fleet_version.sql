-- A counter bumped in the same transaction as every change to the GPU view (registration, partitions,
-- health): the placer keeps the parsed GPU view in memory and reads the rows again only when it moved.
CREATE TABLE IF NOT EXISTS fleet_version (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    version bigint  NOT NULL DEFAULT 0
);
INSERT INTO fleet_version (id, version) VALUES (true, 0) ON CONFLICT DO NOTHING;
