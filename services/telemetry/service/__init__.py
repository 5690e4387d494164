"""Telemetry use cases: the aggregator's handlers and loops, and the node agent."""
