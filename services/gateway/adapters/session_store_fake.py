"""An in-memory twin of RedisSessionStore, for unit tests (its expiry follows an injected clock)."""

from __future__ import annotations

import time
from collections.abc import Callable

from services.gateway.domain.session import Session

__all__ = ["FakeSessionStore"]


class FakeSessionStore:
    """Sessions in a dict, each forgotten ``ttl_s`` after it was stored."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._sessions: dict[str, tuple[Session, float]] = {}

    async def put(self, digest: str, session: Session, *, ttl_s: float) -> None:
        """Store a new session for ``ttl_s`` seconds."""
        self._sessions[digest] = (session, self._clock() + ttl_s)

    async def get(self, digest: str) -> Session | None:
        """The session stored under ``digest``, or None once expired or deleted."""
        entry = self._sessions.get(digest)
        if entry is None or entry[1] <= self._clock():
            self._sessions.pop(digest, None)
            return None
        return entry[0]

    async def delete(self, digest: str) -> None:
        """Forget a session."""
        self._sessions.pop(digest, None)
