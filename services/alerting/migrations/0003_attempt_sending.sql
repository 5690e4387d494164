-- Every attempt is in the delivery log from before its request is sent: the claim writes it as
-- 'sending', and the worker sets its outcome once the receiver answered. An attempt whose outcome could
-- not be recorded (the database gone at that moment) stays 'sending', and the next attempt, after the
-- lease, is logged beside it.
ALTER TABLE delivery_attempts DROP CONSTRAINT IF EXISTS delivery_attempts_outcome_check;
ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_outcome_check
    CHECK (outcome IN ('sending', 'delivered', 'retry', 'dead'));
CREATE INDEX IF NOT EXISTS delivery_attempts_by_attempt ON delivery_attempts (notification_id, attempt);
