"""Postgres stores and queries, the Redis telemetry window, and the fault catalog loader."""
