"""Sessions: log in with an API key the scheduler vouches for, find the session of a cookie, log out."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from libs.common.http.errors import Unauthorized
from services.gateway.domain.session import Session, token_digest
from services.gateway.service.metrics import SESSIONS_REVOKED

__all__ = ["SessionStore", "Sessions"]

log = logging.getLogger(__name__)


class SessionStore(Protocol):
    """Where sessions live (RedisSessionStore; FakeSessionStore in unit tests)."""

    async def put(self, digest: str, session: Session, *, ttl_s: float) -> None: ...
    async def get(self, digest: str) -> Session | None: ...
    async def delete(self, digest: str) -> None: ...


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Sessions:
    """The session use cases; ``whoami`` asks the scheduler who a key is (None: no such key)."""

    store: SessionStore
    whoami: Callable[[str], Awaitable[dict[str, Any] | None]]
    ttl_s: float
    clock: Callable[[], datetime] = field(default=_utcnow)

    async def login(self, api_key: str) -> tuple[str, Session]:
        """A new session for a valid key: (cookie token, session); 401 for a key the scheduler refuses."""
        who = await self.whoami(api_key)
        if who is None:
            raise Unauthorized("unknown or revoked API key", field="api_key")
        session = Session(
            api_key=api_key,
            key_id=str(who["key_id"]),
            tenant_id=who.get("tenant_id"),
            role=who["role"],
            csrf_token=secrets.token_urlsafe(32),
            expires_at=self.clock() + timedelta(seconds=self.ttl_s),
        )
        token = secrets.token_urlsafe(32)
        await self.store.put(token_digest(token), session, ttl_s=self.ttl_s)
        return token, session

    async def current(self, token: str | None) -> Session | None:
        """The live session of a cookie token, or None (no cookie, unknown, expired)."""
        if not token:
            return None
        session = await self.store.get(token_digest(token))
        if session is None or session.expired(self.clock()):
            return None
        return session

    async def logout(self, token: str | None) -> None:
        """Delete the session of a cookie token (nothing happens for an unknown one)."""
        if token:
            await self.store.delete(token_digest(token))

    async def confirm_refused(self, token: str, session: Session) -> bool:
        """After a service refused the session's key (401): True, and the session deleted, when the
        scheduler no longer knows the key either; False when it does (the service had not heard of the
        key yet: keys reach the services through the platform topic)."""
        if await self.whoami(session.api_key) is not None:
            return False
        await self.store.delete(token_digest(token))
        SESSIONS_REVOKED.inc()
        log.info("session of key %s deleted: the key is no longer valid", session.key_id)
        return True
