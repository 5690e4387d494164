"""The HTTP API of alerting: routers, schemas and the error map."""
