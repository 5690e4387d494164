"""Telemetry's HTTP routes, schemas and the tenant-scoped reads they share."""
