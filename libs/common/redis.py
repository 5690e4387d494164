"""Redis: a client factory and key-prefixed namespaces, so tests and tenants never collide."""

from __future__ import annotations

from redis.asyncio import Redis

__all__ = ["Keyspace", "create_redis"]


def create_redis(url: str) -> Redis:
    """An asyncio Redis client (bytes in, bytes out); connects lazily on first command."""
    return Redis.from_url(url, decode_responses=False, health_check_interval=30)


class Keyspace:
    """Builds keys under one prefix: ``Keyspace("gpucloud:").key("quota", "acme")``."""

    def __init__(self, prefix: str) -> None:
        if not prefix or not prefix.endswith(":"):
            raise ValueError("a Redis key prefix must be non-empty and end with ':'")
        self.prefix = prefix

    def key(self, *parts: str) -> str:
        """The full key for these parts."""
        return self.prefix + ":".join(parts)

    def child(self, name: str) -> Keyspace:
        """A nested namespace, e.g. one per service."""
        return Keyspace(f"{self.prefix}{name}:")

    async def clear(self, client: Redis) -> int:
        """Delete every key under this prefix (tests, and rebuilds from Postgres)."""
        deleted = 0
        async for key in client.scan_iter(match=f"{self.prefix}*", count=1000):
            deleted += int(await client.delete(key))
        return deleted
