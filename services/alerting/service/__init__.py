"""Use cases of alerting: the evaluator loop, the delivery worker and the event handlers."""
