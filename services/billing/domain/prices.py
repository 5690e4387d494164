"""Versioned price lists: what one compute-unit-hour or GPU-hour costs, per resource and pricing class."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

__all__ = [
    "PriceBasis",
    "PriceCollisionError",
    "PriceEntry",
    "PriceList",
    "PriceNotFoundError",
    "PriceSegment",
    "PricingClass",
    "ResourceKey",
    "RetroactivePriceError",
    "StoredPrice",
]


class PricingClass(StrEnum):
    """How a workload buys capacity; each class has its own price and revenue account."""

    ON_DEMAND = "on_demand"
    SPOT = "spot"
    RESERVED = "reserved"


class PriceBasis(StrEnum):
    """The quantity a price is per hour of: compute units (1/8 A100 style) or whole GPUs."""

    COMPUTE_UNIT_HOUR = "compute_unit_hour"
    GPU_HOUR = "gpu_hour"


class PriceNotFoundError(LookupError):
    """No price is in force for a resource and pricing class at an instant."""


class RetroactivePriceError(ValueError):
    """A price change tried to take effect before now, which would rewrite past charges."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceKey:
    """What is priced: a GPU model, optionally one MIG profile or one time-sliced share of it."""

    gpu_model: str
    mig_profile: str | None = None
    share_of: int | None = None  # time-slicing: one of `share_of` tenants on the GPU

    def __post_init__(self) -> None:
        if self.mig_profile is not None and self.share_of is not None:
            raise ValueError("a resource is a MIG profile or a time-sliced share, not both")
        if self.share_of is not None and self.share_of < 2:
            raise ValueError("share_of must be at least 2")

    def label(self) -> str:
        """Stable text form, e.g. `A100-80GB`, `A100-80GB/mig:1g.10gb`, `A100-80GB/share:4`."""
        if self.mig_profile is not None:
            return f"{self.gpu_model}/mig:{self.mig_profile}"
        if self.share_of is not None:
            return f"{self.gpu_model}/share:{self.share_of}"
        return self.gpu_model


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceEntry:
    """One version of a price, in force on [effective_from, effective_to)."""

    price_id: str
    resource: ResourceKey
    pricing_class: PricingClass
    basis: PriceBasis
    micro_per_hour: int
    effective_from: datetime
    effective_to: datetime | None = None

    def __post_init__(self) -> None:
        if self.micro_per_hour < 0:
            raise ValueError("micro_per_hour must not be negative")
        _require_aware(self.effective_from)
        if self.effective_to is not None:
            _require_aware(self.effective_to)
            if self.effective_to <= self.effective_from:
                raise ValueError("effective_to must be after effective_from")

    def in_force_at(self, at: datetime) -> bool:
        """True when `at` lies in [effective_from, effective_to)."""
        return self.effective_from <= at and (self.effective_to is None or at < self.effective_to)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredPrice:
    """A price version as the price list keeps it: the entry and when it was added."""

    entry: PriceEntry
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceSegment:
    """A stretch of time [start, end) during which one price entry is in force."""

    start: datetime
    end: datetime
    entry: PriceEntry


class PriceCollisionError(ValueError):
    """Two price versions of one resource and pricing class would take effect at the same instant."""


@dataclass(frozen=True, slots=True)
class PriceList:
    """An immutable set of price entries; the newest effective_from in force wins at any instant."""

    entries: tuple[PriceEntry, ...] = field(default=())

    def __post_init__(self) -> None:
        seen: set[tuple[ResourceKey, PricingClass, datetime]] = set()
        for entry in self.entries:
            slot = (entry.resource, entry.pricing_class, entry.effective_from)
            if slot in seen:
                label, at = entry.resource.label(), entry.effective_from.isoformat()
                raise PriceCollisionError(
                    f"a {entry.pricing_class.value} price for {label} already takes effect at {at} "
                    f"(the same instant as {entry.price_id!r})"
                )
            seen.add(slot)

    @classmethod
    def of(cls, entries: Iterable[PriceEntry]) -> PriceList:
        """Build a price list from entries in any order."""
        return cls(tuple(entries))

    def with_entry(self, entry: PriceEntry, *, now: datetime) -> PriceList:
        """Add a price version; refuses one taking effect before `now` so posted charges stay true."""
        if entry.effective_from < now:
            raise RetroactivePriceError(f"{entry.price_id} would take effect in the past")
        return PriceList((*self.entries, entry))

    def price_at(self, *, resource: ResourceKey, pricing_class: PricingClass, at: datetime) -> PriceEntry:
        """The entry in force at `at`: the newest effective_from among those covering `at`."""
        live = [e for e in self._for(resource, pricing_class) if e.in_force_at(at)]
        if not live:
            raise PriceNotFoundError(f"no {pricing_class} price for {resource.label()} at {at.isoformat()}")
        return max(live, key=lambda e: e.effective_from)

    def segments(
        self, *, resource: ResourceKey, pricing_class: PricingClass, start: datetime, end: datetime
    ) -> list[PriceSegment]:
        """Split [start, end) where the price in force changes; adjacent equal prices stay merged."""
        bounds = {start, end}
        for entry in self._for(resource, pricing_class):
            bounds.update(t for t in (entry.effective_from, entry.effective_to) if t and start < t < end)
        cuts = sorted(bounds)
        segments: list[PriceSegment] = []
        for lo, hi in itertools.pairwise(cuts):
            entry = self.price_at(resource=resource, pricing_class=pricing_class, at=lo)
            if segments and segments[-1].entry == entry:
                segments[-1] = PriceSegment(start=segments[-1].start, end=hi, entry=entry)
            else:
                segments.append(PriceSegment(start=lo, end=hi, entry=entry))
        return segments

    def _for(self, resource: ResourceKey, pricing_class: PricingClass) -> list[PriceEntry]:
        return [e for e in self.entries if e.resource == resource and e.pricing_class == pricing_class]


def _require_aware(at: datetime) -> None:
    if at.tzinfo is None:
        raise ValueError("times must be timezone-aware")
