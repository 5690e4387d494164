"""GET /v1/whoami: who the presented API key is (the gateway asks this when a browser logs in)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from libs.common.auth import Caller

__all__ = ["router"]

router = APIRouter(tags=["tenants"])


class WhoAmI(BaseModel):
    """The principal behind a key."""

    key_id: str = Field(description="The key's id ('admin' for the admin key).")
    tenant_id: str | None = Field(description="The key's tenant; null for the admin key.")
    role: Literal["tenant", "admin"] = Field(description="tenant or admin.")


@router.get("/v1/whoami", summary="The principal behind the presented API key")
async def whoami(caller: Caller) -> WhoAmI:
    return WhoAmI(key_id=caller.key_id, tenant_id=caller.tenant_id, role=caller.role)
