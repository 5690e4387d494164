"""Postgres access for tenant default tags, required-tag policies and flagged workloads (never commits)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeAlias

import asyncpg

__all__ = ["PolicyStore"]

Conn: TypeAlias = "asyncpg.Connection[Any]"

SELECT_TENANT_TAGS = "SELECT tags FROM tenant_tags WHERE tenant_id = $1"
UPSERT_TENANT_TAGS = (
    "INSERT INTO tenant_tags (tenant_id, tags) VALUES ($1, $2) "
    "ON CONFLICT (tenant_id) DO UPDATE SET tags = $2"
)
SELECT_POLICY = "SELECT required FROM tag_policies WHERE tenant_id = $1"
UPSERT_POLICY = (
    "INSERT INTO tag_policies (tenant_id, required) VALUES ($1, $2) "
    "ON CONFLICT (tenant_id) DO UPDATE SET required = $2"
)
INSERT_VIOLATION = (
    "INSERT INTO tag_violations (workload_id, placement_id, tenant_id, missing, flagged_at) "
    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
)


class PolicyStore:
    """Tenant default tags, required-tag policies and flagged workloads."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def tenant_tags(self, tenant_id: str) -> dict[str, str]:
        """A tenant's default tags."""
        return dict(await self._conn.fetchval(SELECT_TENANT_TAGS, tenant_id) or {})

    async def set_tenant_tags(self, tenant_id: str, tags: Mapping[str, str]) -> None:
        """Replace a tenant's default tags."""
        await self._conn.execute(UPSERT_TENANT_TAGS, tenant_id, dict(tags))

    async def required(self, tenant_id: str) -> frozenset[str]:
        """The tag keys a tenant's workloads must carry."""
        return frozenset(await self._conn.fetchval(SELECT_POLICY, tenant_id) or ())

    async def set_required(self, tenant_id: str, keys: Sequence[str]) -> None:
        """Replace a tenant's required-tag policy."""
        await self._conn.execute(UPSERT_POLICY, tenant_id, sorted(set(keys)))

    async def flag(
        self, *, workload_id: str, placement_id: str, tenant_id: str, missing: Sequence[str], at: datetime
    ) -> None:
        """Flag a workload placed without required tags."""
        await self._conn.execute(INSERT_VIOLATION, workload_id, placement_id, tenant_id, list(missing), at)
