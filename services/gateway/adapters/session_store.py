"""Sessions in Redis under the digest of their cookie token, expiring with the session."""

from __future__ import annotations

import math

from pydantic import ValidationError
from redis.asyncio import Redis

from libs.common.redis import Keyspace
from services.gateway.domain.session import Session

__all__ = ["RedisSessionStore"]


class RedisSessionStore:
    """One JSON value per session; Redis deletes it when its TTL (the session's life) ends."""

    def __init__(self, *, redis: Redis, keys: Keyspace) -> None:
        self._redis = redis
        self._keys = keys

    async def put(self, digest: str, session: Session, *, ttl_s: float) -> None:
        """Store a new session for ``ttl_s`` seconds."""
        await self._redis.set(self._keys.key(digest), session.model_dump_json(), ex=max(1, math.ceil(ttl_s)))

    async def get(self, digest: str) -> Session | None:
        """The session stored under ``digest``, or None (never stored, expired, deleted, unreadable)."""
        raw = await self._redis.get(self._keys.key(digest))
        if raw is None:
            return None
        try:
            return Session.model_validate_json(raw)
        except ValidationError:
            return None

    async def delete(self, digest: str) -> None:
        """Forget a session (logout, or its key was revoked)."""
        await self._redis.delete(self._keys.key(digest))
