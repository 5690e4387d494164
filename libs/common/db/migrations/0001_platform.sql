-- Tables every service has in its own schema: the transactional outbox, the consumer inbox,
-- dead-letter records, and the local replica of tenants and API keys used for authentication.

CREATE TABLE IF NOT EXISTS outbox (
    seq         bigserial PRIMARY KEY,
    event_id    uuid        NOT NULL UNIQUE,
    topic       text        NOT NULL,
    key         text        NOT NULL,
    payload     bytea       NOT NULL,
    traceparent text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz
);
CREATE INDEX IF NOT EXISTS outbox_unsent ON outbox (seq) WHERE sent_at IS NULL;

CREATE TABLE IF NOT EXISTS inbox (
    consumer     text        NOT NULL,
    event_id     text        NOT NULL,
    topic        text        NOT NULL,
    status       text        NOT NULL DEFAULT 'applied',  -- applied | dead_lettered
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

CREATE TABLE IF NOT EXISTS dead_letters (
    id          bigserial PRIMARY KEY,
    consumer    text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    "offset"    bigint      NOT NULL,
    event_id    text,
    event_type  text,
    error       text        NOT NULL,
    attempts    integer     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS tenants (
    tenant_id  text PRIMARY KEY,
    name       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS api_keys (
    key_id     text PRIMARY KEY,
    key_hash   text        NOT NULL UNIQUE,
    tenant_id  text,
    role       text        NOT NULL CHECK (role IN ('tenant', 'admin')),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
