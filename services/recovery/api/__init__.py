"""The HTTP API of recovery: routers per noun and their response schemas."""
