-- Alerts whose condition holds but whose `for` has not elapsed, for the API (GET /v1/alerts?state=pending).
-- Written in the evaluator's transaction of the transition: a PENDING transition writes the row, the
-- alert's FIRING, CANCELLED or RESOLVED one deletes it; an evaluator taking over rewrites the whole table
-- from what it restored (prometheus-mode pending alerts start over).
CREATE TABLE IF NOT EXISTS pending_alerts (
    fingerprint text PRIMARY KEY,
    rule        text             NOT NULL,
    tenant      text,
    severity    text             NOT NULL,
    labels      jsonb            NOT NULL,
    annotations jsonb            NOT NULL,
    value       double precision,
    active_at   timestamptz      NOT NULL,
    fires_at    timestamptz      NOT NULL
);
