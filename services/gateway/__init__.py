"""The gateway: serves the web console on one origin, holds browser sessions, proxies the six APIs
with the session's key and fans live data out over Server-Sent Events."""
