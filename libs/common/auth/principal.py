"""Who is calling: FastAPI dependencies that authenticate the API key and scope queries by tenant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, Request

from libs.common.auth.keys import constant_time_equal, hash_key
from libs.common.http.errors import Forbidden, Unauthorized

__all__ = ["Admin", "Caller", "Principal", "authenticate", "require_admin", "tenant_filter"]

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
    row = await runtime.pool.fetchrow(_LOOKUP, hash_key(key))
    if row is None:
        raise Unauthorized("unknown or revoked API key")
    return Principal(key_id=row["key_id"], role=row["role"], tenant_id=row["tenant_id"])


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
