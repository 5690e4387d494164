"""Price API: the versioned price list and new price versions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, status

from libs.common.auth import Admin, Caller
from libs.common.http.errors import error_responses
from services.billing.adapters import config_queries
from services.billing.api import errors
from services.billing.api.schemas import PriceIn
from services.billing.domain.prices import (
    PriceCollisionError,
    PriceEntry,
    ResourceKey,
    RetroactivePriceError,
    StoredPrice,
)
from services.billing.service.unit_of_work import billing_uow

__all__ = ["router"]

router = APIRouter(tags=["configuration"])


@router.get("/v1/prices")
async def list_prices(request: Request, _: Caller) -> list[dict[str, Any]]:
    rows = await config_queries.prices(request.app.state.runtime.pool)
    return [_price(p) for p in rows]


@router.post("/v1/admin/prices", status_code=status.HTTP_201_CREATED, responses=error_responses(409))
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
    async with billing_uow(request.app.state.runtime) as uow:
        store = uow.prices
        try:
            (await store.price_list()).with_entry(entry, now=datetime.now(UTC))
        except RetroactivePriceError as exc:
            raise errors.retroactive_price(exc) from exc
        except PriceCollisionError as exc:
            raise errors.price_collides(exc) from exc
        if not await store.add(entry):
            raise errors.price_exists()
        await uow.commit()
    return body.model_dump(mode="json")


def _price(p: StoredPrice) -> dict[str, Any]:
    e = p.entry
    return {
        "price_id": e.price_id,
        "gpu_model": e.resource.gpu_model,
        "mig_profile": e.resource.mig_profile,
        "share_of": e.resource.share_of,
        "pricing_class": e.pricing_class.value,
        "basis": e.basis.value,
        "micro_per_hour": e.micro_per_hour,
        "effective_from": e.effective_from,
        "effective_to": e.effective_to,
        "created_at": p.created_at,
    }
