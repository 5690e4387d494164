"""Postgres access for the versioned price list (never commits)."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg

from services.billing.domain.prices import PriceBasis, PriceEntry, PriceList, PricingClass, ResourceKey

__all__ = ["SELECT_PRICES", "PriceStore", "price_entry"]

Conn: TypeAlias = "asyncpg.Connection[Any]"

SELECT_PRICES = "SELECT * FROM prices ORDER BY effective_from, price_id"
INSERT_PRICE = (
    "INSERT INTO prices (price_id, gpu_model, mig_profile, share_of, pricing_class, basis, micro_per_hour, "
    "effective_from, effective_to) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
    "ON CONFLICT DO NOTHING RETURNING 1"
)


class PriceStore:
    """The versioned price list."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def price_list(self) -> PriceList:
        """Every price version."""
        return PriceList.of(price_entry(r) for r in await self._conn.fetch(SELECT_PRICES))

    async def add(self, entry: PriceEntry) -> bool:
        """Insert a new version; False when one already takes effect at that instant."""
        r = entry.resource
        return bool(
            await self._conn.fetchval(
                INSERT_PRICE,
                entry.price_id,
                r.gpu_model,
                r.mig_profile,
                r.share_of,
                entry.pricing_class.value,
                entry.basis.value,
                entry.micro_per_hour,
                entry.effective_from,
                entry.effective_to,
            )
        )


def price_entry(r: asyncpg.Record) -> PriceEntry:
    """The price version a row of ``prices`` holds."""
    return PriceEntry(
        price_id=r["price_id"],
        resource=ResourceKey(gpu_model=r["gpu_model"], mig_profile=r["mig_profile"], share_of=r["share_of"]),
        pricing_class=PricingClass(r["pricing_class"]),
        basis=PriceBasis(r["basis"]),
        micro_per_hour=r["micro_per_hour"],
        effective_from=r["effective_from"],
        effective_to=r["effective_to"],
    )
