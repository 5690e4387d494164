"""Who is calling: FastAPI dependencies that authenticate the API key and scope queries by tenant."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Literal

from fastapi import Depends, Request

from libs.common.auth.keys import constant_time_equal, hash_key
from libs.common.http.errors import Forbidden, Unauthorized

__all__ = ["Admin", "Caller", "KeyCache", "Principal", "authenticate", "require_admin", "tenant_filter"]

_LOOKUP = "SELECT key_id, tenant_id, role FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: a tenant's key, or an admin key (tenant_id None)."""

    key_id: str
    role: Literal["tenant", "admin"]
    tenant_id: str | None

    @property
    def is_admin(self) -> bool:
        """Admin keys manage the fleet and see every tenant."""
        return self.role == "admin"


@dataclass
class KeyCache:
    """Recently authenticated keys (by hash), so a busy API does not read ``api_keys`` on every request.

    Only successful lookups are kept, for ``ttl_s`` at most (0 disables the cache). The service that
    revokes a key evicts it at once; another service or replica learns of a revocation through the
    platform topic and stops accepting the key within ``ttl_s`` of applying it.
    """

    ttl_s: float
    clock: Callable[[], float] = time.monotonic
    max_entries: int = 10_000
    _entries: dict[str, tuple[Principal, float]] = field(default_factory=dict)

    def get(self, key_hash: str) -> Principal | None:
        """The cached principal of a key hash, if still fresh."""
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        if entry[1] <= self.clock():
            del self._entries[key_hash]
            return None
        return entry[0]

    def put(self, key_hash: str, principal: Principal) -> None:
        """Remember a successful lookup (no-op when the cache is disabled)."""
        if self.ttl_s <= 0:
            return
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[key_hash] = (principal, self.clock() + self.ttl_s)

    def evict_key(self, key_id: str) -> None:
        """Forget every entry of one key (its revocation was just committed here)."""
        for key_hash in [h for h, (p, _) in self._entries.items() if p.key_id == key_id]:
            del self._entries[key_hash]


def _presented_key(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.headers.get("x-api-key", "").strip()


async def authenticate(request: Request) -> Principal:
    """The caller behind the request's API key (Authorization: Bearer, or X-API-Key); 401 otherwise."""
    key = _presented_key(request)
    if not key:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
    runtime = request.app.state.runtime
    if constant_time_equal(key, runtime.settings.admin_key):
        return Principal(key_id="admin", role="admin", tenant_id=None)
    digest = hash_key(key)
    cache: KeyCache = runtime.key_cache
    principal = cache.get(digest)
    if principal is not None:
        return principal
    row = await runtime.pool.fetchrow(_LOOKUP, digest)
    if row is None:
        raise Unauthorized("unknown or revoked API key")
    principal = Principal(key_id=row["key_id"], role=row["role"], tenant_id=row["tenant_id"])
    cache.put(digest, principal)
    return principal


async def require_admin(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    """Only admin keys pass; tenants get 403."""
    if not principal.is_admin:
        raise Forbidden("this operation needs an admin key")
    return principal


Caller = Annotated[Principal, Depends(authenticate)]
Admin = Annotated[Principal, Depends(require_admin)]


def tenant_filter(principal: Principal, requested: str | None = None) -> str | None:
    """The tenant a query must be restricted to: the caller's own, or (admins) the one asked for.

    Returns None only for an admin asking about every tenant. A tenant asking about another
    tenant is refused, so a tenant-scoped query can never escape its tenant.
    """
    if principal.is_admin:
        return requested
    if requested is not None and requested != principal.tenant_id:
        raise Forbidden(f"tenant {principal.tenant_id!r} may not act for tenant {requested!r}")
    return principal.tenant_id
