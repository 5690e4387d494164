"""Telemetry's IO: Postgres stores, Redis live state, NVML, the simulated fleet."""
