"""The inventory HTTP API: read and admin routers, their schemas and the domain-error map."""
