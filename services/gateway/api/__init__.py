"""The gateway's HTTP surface: /api/session, /api/<service>/..., /api/live and the console."""
