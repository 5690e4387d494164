"""Price API: the versioned price list and new price versions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, status

from libs.common.auth import Admin, Caller
from services.billing.adapters import config_queries
from services.billing.adapters.price_store import PriceStore
from services.billing.api import errors
from services.billing.api.schemas import PriceIn
from services.billing.domain.prices import PriceEntry, ResourceKey, RetroactivePriceError

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.get("/v1/prices")
async def list_prices(request: Request, _: Caller) -> list[dict[str, Any]]:
    rows = await config_queries.prices(request.app.state.runtime.pool)
    return [dict(r) for r in rows]


@router.post("/v1/admin/prices", status_code=status.HTTP_201_CREATED)
async def create_price(body: PriceIn, request: Request, _: Admin) -> dict[str, Any]:
    try:
        entry = PriceEntry(
            price_id=body.price_id,
            resource=ResourceKey(
                gpu_model=body.gpu_model, mig_profile=body.mig_profile, share_of=body.share_of
            ),
            pricing_class=body.pricing_class,
            basis=body.basis,
            micro_per_hour=body.micro_per_hour,
            effective_from=body.effective_from,
            effective_to=body.effective_to,
        )
    except ValueError as exc:
        raise errors.invalid_price(exc) from exc
    async with request.app.state.runtime.uow() as uow:
        store = PriceStore(uow.conn)
        try:
            (await store.price_list()).with_entry(entry, now=datetime.now(UTC))
        except RetroactivePriceError as exc:
            raise errors.retroactive_price(exc) from exc
        if not await store.add(entry):
            raise errors.price_exists()
        await uow.commit()
    return body.model_dump(mode="json")
