"""Metering: turn an allocation's lifetime into charge lines at the prices in force.

Rounding rule (the only one in billing): each charge line's amount is computed exactly as
quantity x hours x price and rounded half-even to a whole micro-unit once, on that line. Ledger
totals are sums of line amounts, so every total reconciles exactly to its lines.

Periods follow a fixed grid (default 1 minute, aligned to the Unix epoch) cut further at price
changes and at the allocation's own start and end. The lines for a stretch of time are therefore
the same whether it was rated in one call or many, which keeps idempotency keys and recomputation
(reconcile.py) exact.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType

from services.billing.domain.prices import PriceBasis, PriceEntry, PriceList, PricingClass, ResourceKey

__all__ = [
    "DEFAULT_INTERVAL",
    "Allocation",
    "ChargeLine",
    "EndReason",
    "Rating",
    "charge_key",
    "close",
    "floor_to_grid",
    "migrate",
    "rate",
]

DEFAULT_INTERVAL = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROS_PER_HOUR = 3_600_000_000
_QUANTITY_PLACES = 9  # quantities are informational; amounts never derive from the rounded quantity


class EndReason(StrEnum):
    """Why an allocation stopped being charged."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"
    MIGRATED = "migrated"
    RECLAIMED = "reclaimed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    """A workload's hold on one resource, charged on [started_at, ended_at)."""

    allocation_id: str
    workload_id: str
    tenant_id: str
    project: str
    resource: ResourceKey
    pricing_class: PricingClass
    compute_units: Decimal
    gpus: Decimal
    started_at: datetime
    tags: Mapping[str, str] = field(default_factory=dict)
    ended_at: datetime | None = None
    end_reason: EndReason | None = None

    def __post_init__(self) -> None:
        if self.compute_units < 0 or self.gpus < 0:
            raise ValueError("compute_units and gpus must not be negative")
        if self.ended_at is not None and self.ended_at < self.started_at:
            raise ValueError("an allocation cannot end before it starts")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChargeLine:
    """One priced period of one allocation; `key` makes charging it twice impossible."""

    key: str
    allocation_id: str
    workload_id: str
    tenant_id: str
    project: str
    tags: Mapping[str, str]
    resource: ResourceKey
    pricing_class: PricingClass
    period_start: datetime
    period_end: datetime
    basis: PriceBasis
    quantity_hours: Decimal  # basis-unit-hours (compute-unit-hours or GPU-hours), 9 places
    compute_unit_hours: Decimal  # always in compute units, for fair share; 9 places
    price_id: str
    micro_per_hour: int
    amount_micro: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Rating:
    """Lines produced by one rating call and the instant the allocation is now rated up to."""

    lines: tuple[ChargeLine, ...]
    rated_until: datetime


def charge_key(*, allocation_id: str, start: datetime, end: datetime) -> str:
    """Deterministic idempotency key for one allocation period."""
    return f"{allocation_id}|{_utc(start).isoformat()}|{_utc(end).isoformat()}"


def floor_to_grid(at: datetime, *, interval: timedelta = DEFAULT_INTERVAL) -> datetime:
    """The latest grid instant at or before `at` (grid aligned to the Unix epoch)."""
    return _EPOCH + ((at - _EPOCH) // interval) * interval


def rate(
    *,
    allocation: Allocation,
    rated_until: datetime | None,
    now: datetime,
    prices: PriceList,
    interval: timedelta = DEFAULT_INTERVAL,
) -> Rating:
    """Charge lines from `rated_until`: an ended allocation up to its end, an open one up to the last tick."""
    lower = rated_until or allocation.started_at
    upper = _upper_bound(allocation, now=now, interval=interval)
    if upper <= lower:
        return Rating(lines=(), rated_until=lower)
    segments = prices.segments(
        resource=allocation.resource, pricing_class=allocation.pricing_class, start=lower, end=upper
    )
    tags = MappingProxyType(dict(allocation.tags))  # one read-only copy shared by the call's lines
    lines = tuple(
        line
        for seg in segments
        for line in _lines(
            allocation, start=seg.start, end=seg.end, price=seg.entry, tags=tags, interval=interval
        )
    )
    return Rating(lines=lines, rated_until=upper)


def close(allocation: Allocation, *, at: datetime, reason: EndReason) -> Allocation:
    """End an allocation's charging at `at`."""
    if allocation.ended_at is not None:
        raise ValueError(f"allocation {allocation.allocation_id} already ended")
    return replace(allocation, ended_at=at, end_reason=reason)


def migrate(
    allocation: Allocation,
    *,
    at: datetime,
    new_allocation_id: str,
    resource: ResourceKey | None = None,
    compute_units: Decimal | None = None,
    gpus: Decimal | None = None,
) -> tuple[Allocation, Allocation]:
    """Close the migrated-away allocation and open its successor at the same instant, so no gap or overlap."""
    closed = close(allocation, at=at, reason=EndReason.MIGRATED)
    opened = replace(
        allocation,
        allocation_id=new_allocation_id,
        resource=resource or allocation.resource,
        compute_units=allocation.compute_units if compute_units is None else compute_units,
        gpus=allocation.gpus if gpus is None else gpus,
        started_at=at,
        ended_at=None,
        end_reason=None,
    )
    return closed, opened


def _upper_bound(allocation: Allocation, *, now: datetime, interval: timedelta) -> datetime:
    if allocation.ended_at is not None and allocation.ended_at <= now:
        return allocation.ended_at
    return floor_to_grid(now, interval=interval)


def _grid_bounds(start: datetime, end: datetime, interval: timedelta) -> list[datetime]:
    """start, every grid instant strictly between, end: consecutive pairs are the cells."""
    bounds = [start]
    cursor = floor_to_grid(start, interval=interval) + interval  # after the first cut, whole intervals
    while cursor < end:
        bounds.append(cursor)
        cursor += interval
    if end > start:
        bounds.append(end)
    return bounds


@dataclass(frozen=True, slots=True)
class _Quantities:
    """What one cell is charged; the same for every cell of equal length at one price."""

    quantity_hours: Decimal
    compute_unit_hours: Decimal
    amount_micro: int


def _quantities(allocation: Allocation, *, micros: int, price: PriceEntry) -> _Quantities:
    hours = Fraction(micros, _MICROS_PER_HOUR)
    units = allocation.gpus if price.basis is PriceBasis.GPU_HOUR else allocation.compute_units
    quantity = Fraction(units) * hours
    return _Quantities(
        quantity_hours=_fixed(quantity),
        compute_unit_hours=_fixed(Fraction(allocation.compute_units) * hours),
        amount_micro=round(quantity * price.micro_per_hour),  # Fraction rounds half-even
    )


def _lines(
    allocation: Allocation,
    *,
    start: datetime,
    end: datetime,
    price: PriceEntry,
    tags: Mapping[str, str],
    interval: timedelta,
) -> Iterator[ChargeLine]:
    """One line per grid cell of [start, end) at one price.

    Amounts are computed once per distinct cell length (a day of minutes has at most three), and
    each boundary is converted and formatted once, though it ends one cell and starts the next.
    """
    bounds = [_utc(at) for at in _grid_bounds(start, end, interval)]
    stamps = [at.isoformat() for at in bounds]
    by_length: dict[int, _Quantities] = {}
    allocation_id = allocation.allocation_id
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        micros = _micros(hi - lo)
        q = by_length.get(micros)
        if q is None:
            q = by_length[micros] = _quantities(allocation, micros=micros, price=price)
        yield ChargeLine(
            key=f"{allocation_id}|{stamps[i]}|{stamps[i + 1]}",  # == charge_key(...)
            allocation_id=allocation_id,
            workload_id=allocation.workload_id,
            tenant_id=allocation.tenant_id,
            project=allocation.project,
            tags=tags,
            resource=allocation.resource,
            pricing_class=allocation.pricing_class,
            period_start=lo,
            period_end=hi,
            basis=price.basis,
            quantity_hours=q.quantity_hours,
            compute_unit_hours=q.compute_unit_hours,
            price_id=price.price_id,
            micro_per_hour=price.micro_per_hour,
            amount_micro=q.amount_micro,
        )


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _fixed(value: Fraction) -> Decimal:
    return Decimal(round(value * 10**_QUANTITY_PLACES)).scaleb(-_QUANTITY_PLACES)


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC)
