"""Pure rules and models of alerting: stdlib and pydantic only; no clock, no ids, no IO."""
