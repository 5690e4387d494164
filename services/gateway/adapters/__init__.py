"""The gateway's adapters: the session store (Redis) and the services it calls (httpx)."""
