"""asyncpg SQL for creation drafts (the three-step path); takes a connection and never commits."""

from __future__ import annotations

from typing import Any

from services.scheduler.adapters.postgres import Conn
from services.scheduler.domain.stored import StoredDraft, columns_of

__all__ = ["DraftStore"]

INSERT_DRAFT = "INSERT INTO drafts (draft_id, tenant_id, body) VALUES ($1, $2, $3)"
GET_DRAFT = f"""
SELECT {columns_of(StoredDraft)} FROM drafts
WHERE draft_id = $1 AND ($2::text IS NULL OR tenant_id = $2) FOR UPDATE
"""
UPDATE_DRAFT = "UPDATE drafts SET body = $2, workload_id = $3, updated_at = now() WHERE draft_id = $1"


class DraftStore:
    """Draft rows on one connection (or the pool)."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def insert_draft(self, *, draft_id: str, tenant: str, body: dict[str, Any]) -> None:
        """Record an empty draft."""
        await self.conn.execute(INSERT_DRAFT, draft_id, tenant, body)

    async def draft(self, draft_id: str, *, tenant: str | None) -> StoredDraft | None:
        """A draft locked for this transaction."""
        found = await self.conn.fetchrow(GET_DRAFT, draft_id, tenant)
        return None if found is None else StoredDraft(*found)

    async def update_draft(self, draft_id: str, *, body: dict[str, Any], workload_id: str | None) -> None:
        """Replace a draft's body; a workload id marks it submitted."""
        await self.conn.execute(UPDATE_DRAFT, draft_id, body, workload_id)
