"""Accrual API: rate every open allocation up to now, on demand."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request

from libs.common.auth import Admin
from services.billing.api.params import api_settings
from services.billing.service.loops import accrue_all, metering_config

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.post("/v1/admin/accrual")
async def run_accrual(request: Request, _: Admin) -> dict[str, int]:
    config = metering_config(api_settings(request))
    return {"rated": await accrue_all(request.app.state.runtime, now=datetime.now(UTC), config=config)}
