-- What the outbox relay (libs/common/bus/relay.py) needs to survive a broker that lost its log and an
-- event the broker refuses.
--
-- sent_to: the cluster id of the broker a row was published to. A relay that finds itself talking to
-- another broker (an empty one restarted or put in its place) publishes again the kept rows sent to a
-- different one. Rows sent before this column existed have none and are left alone.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS sent_to text;

-- The dead-letter path of the outbox: a row the broker refuses for itself (too large, say) is moved here
-- with the error, so the rows behind it are published; it is never retried on its own.
CREATE TABLE IF NOT EXISTS outbox_dead_letters (
    seq         bigint      PRIMARY KEY,
    event_id    uuid        NOT NULL UNIQUE,
    topic       text        NOT NULL,
    key         text        NOT NULL,
    payload     bytea       NOT NULL,
    traceparent text,
    created_at  timestamptz NOT NULL,
    refused_at  timestamptz NOT NULL DEFAULT now(),
    error       text        NOT NULL
);
