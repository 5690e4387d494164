"""An in-memory twin of PriceStore for unit tests: the versioned price list, no database."""

from __future__ import annotations

from collections.abc import Iterable

from services.billing.domain.prices import PriceEntry, PriceList

__all__ = ["FakePriceStore"]


class FakePriceStore:
    """Price versions (``entries``), as PriceStore keeps them; starts with ``entries`` (none by default,
    where the real schema is seeded with the catalogue's defaults)."""

    def __init__(self, entries: Iterable[PriceEntry] = ()) -> None:
        self.entries: list[PriceEntry] = list(entries)

    async def price_list(self) -> PriceList:
        """Every price version, by effective time then id."""
        return PriceList.of(sorted(self.entries, key=lambda e: (e.effective_from, e.price_id)))

    async def add(self, entry: PriceEntry) -> bool:
        """Insert a new version; False when its id, or a price for its resource and class at its instant,
        is already there."""
        slot = (entry.resource, entry.pricing_class, entry.effective_from)
        if any(
            e.price_id == entry.price_id or (e.resource, e.pricing_class, e.effective_from) == slot
            for e in self.entries
        ):
            return False
        self.entries.append(entry)
        return True
