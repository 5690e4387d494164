"""Spot advice: what a tenant would save by running interruptible work on spot capacity."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from services.billing.domain.prices import (
    PriceBasis,
    PriceEntry,
    PriceList,
    PriceNotFoundError,
    PricingClass,
    ResourceKey,
)

__all__ = ["SpotAdvice", "SpotReport", "WorkloadUsage", "advise_spot", "spot_report"]

_PCT = Decimal("0.01")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadUsage:
    """A workload's usage over a history window, and whether it can tolerate interruption."""

    workload_id: str
    tenant_id: str
    resource: ResourceKey
    pricing_class: PricingClass
    gpu_hours: Decimal
    compute_unit_hours: Decimal
    window: timedelta
    non_critical: bool = False
    checkpointable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotAdvice:
    """Recommend spot for one workload: its cost over the window on-demand and on spot."""

    workload_id: str
    tenant_id: str
    resource: ResourceKey
    on_demand_micro: int
    spot_micro: int
    saving_micro: int
    saving_pct: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotReport:
    """A tenant's available saving: amount, and percentage of what all its listed usage costs now."""

    tenant_id: str
    advices: tuple[SpotAdvice, ...]
    current_cost_micro: int
    saving_micro: int
    saving_pct: Decimal


def advise_spot(*, usage: WorkloadUsage, prices: PriceList, at: datetime) -> SpotAdvice | None:
    """Advice for an on-demand, non-critical or checkpointable workload when spot is cheaper; else None."""
    if usage.pricing_class is not PricingClass.ON_DEMAND or not (usage.non_critical or usage.checkpointable):
        return None
    try:
        on_demand = prices.price_at(resource=usage.resource, pricing_class=PricingClass.ON_DEMAND, at=at)
        spot = prices.price_at(resource=usage.resource, pricing_class=PricingClass.SPOT, at=at)
    except PriceNotFoundError:
        return None
    od_micro, spot_micro = _cost(usage, on_demand), _cost(usage, spot)
    if spot_micro >= od_micro:
        return None
    return SpotAdvice(
        workload_id=usage.workload_id,
        tenant_id=usage.tenant_id,
        resource=usage.resource,
        on_demand_micro=od_micro,
        spot_micro=spot_micro,
        saving_micro=od_micro - spot_micro,
        saving_pct=_pct(od_micro - spot_micro, od_micro),
    )


def spot_report(
    *, tenant_id: str, usages: Iterable[WorkloadUsage], prices: PriceList, at: datetime
) -> SpotReport:
    """Sum the advice over a tenant's workloads; usage without a current price counts in neither sum."""
    own = [u for u in usages if u.tenant_id == tenant_id]
    current = sum(_current_cost(u, prices, at) for u in own)
    advices = tuple(a for u in own if (a := advise_spot(usage=u, prices=prices, at=at)) is not None)
    saving = sum(a.saving_micro for a in advices)
    return SpotReport(
        tenant_id=tenant_id,
        advices=advices,
        current_cost_micro=current,
        saving_micro=saving,
        saving_pct=_pct(saving, current),
    )


def _current_cost(usage: WorkloadUsage, prices: PriceList, at: datetime) -> int:
    try:
        entry = prices.price_at(resource=usage.resource, pricing_class=usage.pricing_class, at=at)
    except PriceNotFoundError:
        return 0
    return _cost(usage, entry)


def _cost(usage: WorkloadUsage, entry: PriceEntry) -> int:
    hours = usage.gpu_hours if entry.basis is PriceBasis.GPU_HOUR else usage.compute_unit_hours
    return round(Fraction(hours) * entry.micro_per_hour)  # half-even, like charge lines


def _pct(part: int, whole: int) -> Decimal:
    if whole == 0:
        return Decimal("0.00")
    return (Decimal(part) * 100 / Decimal(whole)).quantize(_PCT, rounding=ROUND_HALF_EVEN)
