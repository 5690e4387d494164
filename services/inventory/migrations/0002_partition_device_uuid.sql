-- A MIG partition's device UUID (MIG-...) as the node agent discovered it; NULL for shares and until
-- discovery reports the instance.
ALTER TABLE partitions ADD COLUMN IF NOT EXISTS device_uuid text;
