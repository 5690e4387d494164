-- Alerting: configuration (rules, routes, silences, receivers), evaluation state persisted on
-- transitions, alert history, and the notification outbox with its delivery log and dead letters.

CREATE TABLE IF NOT EXISTS config_meta (
    id              integer PRIMARY KEY CHECK (id = 1),
    version         bigint  NOT NULL DEFAULT 0,   -- bumped by every configuration change
    defaults_seeded boolean NOT NULL DEFAULT false,
    routing_tree    jsonb                          -- NULL: a default route to the default receiver
);
INSERT INTO config_meta (id) VALUES (1) ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS rules (
    name         text PRIMARY KEY,
    owner_tenant text,
    spec         jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS silences (
    id           text PRIMARY KEY,
    matchers     jsonb       NOT NULL,
    starts_at    timestamptz NOT NULL,
    ends_at      timestamptz NOT NULL,
    created_by   text        NOT NULL,
    comment      text        NOT NULL,
    owner_tenant text,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS receivers (
    name        text PRIMARY KEY,
    kind        text        NOT NULL CHECK (kind IN ('webhook', 'pagerduty', 'slack')),
    url         text        NOT NULL,
    secret      text        NOT NULL,             -- HMAC signing secret; never returned by the API
    routing_key text,                             -- PagerDuty integration key; never returned
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per series, node or event alert that has something to remember (pending/firing alerts,
-- timers); written only when a transition happens.
CREATE TABLE IF NOT EXISTS series_state (
    key        text PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('series', 'node', 'event')),
    state      jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS alert_groups (
    key        text PRIMARY KEY,
    state      jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Events (faults, budgets, escalations) waiting for the evaluator; written by the consumer's
-- handlers inside their inbox transaction, deleted with the transitions they cause.
CREATE TABLE IF NOT EXISTS signals (
    id         bigserial PRIMARY KEY,
    payload    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS alerts (
    id          bigserial PRIMARY KEY,
    fingerprint text        NOT NULL,
    rule        text        NOT NULL,
    tenant      text,
    severity    text        NOT NULL,
    labels      jsonb       NOT NULL,
    annotations jsonb       NOT NULL,
    value       double precision,
    starts_at   timestamptz NOT NULL,
    ends_at     timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS alerts_one_active ON alerts (fingerprint) WHERE ends_at IS NULL;
CREATE INDEX IF NOT EXISTS alerts_by_start ON alerts (starts_at DESC);

-- The notification outbox: written in the transaction of the transition that caused it.
CREATE TABLE IF NOT EXISTS notifications (
    id               text PRIMARY KEY,
    receiver         text        NOT NULL,
    group_key        text        NOT NULL,
    payload          jsonb       NOT NULL,
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'dead')),
    attempts         integer     NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    first_attempt_at timestamptz,
    lease_until      timestamptz,
    delivered_at     timestamptz,
    last_error       text
);
CREATE INDEX IF NOT EXISTS notifications_due ON notifications (next_attempt_at) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS notifications_pending_by_group ON notifications (group_key, created_at)
    WHERE status = 'pending';

CREATE TABLE IF NOT EXISTS notification_alerts (
    notification_id text NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    fingerprint     text NOT NULL,
    tenant          text,
    PRIMARY KEY (notification_id, fingerprint)
);
CREATE INDEX IF NOT EXISTS notification_alerts_fp ON notification_alerts (fingerprint);

CREATE TABLE IF NOT EXISTS delivery_attempts (
    id              bigserial PRIMARY KEY,
    notification_id text        NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    receiver        text        NOT NULL,
    attempt         integer     NOT NULL,
    at              timestamptz NOT NULL DEFAULT now(),
    status_code     integer,
    outcome         text        NOT NULL CHECK (outcome IN ('delivered', 'retry', 'dead')),
    error           text,
    duration_ms     double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS delivery_attempts_by_notification ON delivery_attempts (notification_id, id);

CREATE TABLE IF NOT EXISTS delivery_dead_letters (
    id              bigserial PRIMARY KEY,
    notification_id text        NOT NULL UNIQUE REFERENCES notifications (id) ON DELETE CASCADE,
    receiver        text        NOT NULL,
    reason          text        NOT NULL,
    attempts        integer     NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
