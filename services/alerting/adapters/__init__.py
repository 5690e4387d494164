"""Postgres stores, read queries and HTTP to receivers of alerting."""
