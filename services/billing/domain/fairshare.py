"""Fair-share feed: each tenant's compute-unit-hours with exponential decay (half-life default 7 days).

A charge line counts at its period end with weight 2^-(age / half_life). Decay is not money, so
Decimal with 28 significant digits is enough; results are quantized to 6 places for stable output.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, localcontext

from services.billing.domain.rating import ChargeLine

__all__ = ["DEFAULT_HALF_LIFE", "DecayedUsage", "accrue", "decay_factor", "decayed_usage"]

DEFAULT_HALF_LIFE = timedelta(days=7)
_PLACES = Decimal("0.000001")


@dataclass(frozen=True, slots=True, kw_only=True)
class DecayedUsage:
    """A tenant's decayed compute-unit-hours as of an instant; advance it with `accrue`."""

    tenant_id: str
    value: Decimal
    as_of: datetime


def decay_factor(*, age: timedelta, half_life: timedelta = DEFAULT_HALF_LIFE) -> Decimal:
    """2^-(age / half_life); usage from the future (negative age) is not amplified."""
    if age <= timedelta(0):
        return Decimal(1)
    with localcontext() as ctx:
        ctx.prec = 28
        exponent = Decimal(age.total_seconds()) / Decimal(half_life.total_seconds())
        return Decimal("0.5") ** exponent


def decayed_usage(
    lines: Iterable[ChargeLine], *, now: datetime, half_life: timedelta = DEFAULT_HALF_LIFE
) -> dict[str, Decimal]:
    """Decayed compute-unit-hours per tenant as of `now`, from charge lines."""
    totals: defaultdict[str, Decimal] = defaultdict(Decimal)
    for line in lines:
        weight = decay_factor(age=now - line.period_end, half_life=half_life)
        totals[line.tenant_id] += line.compute_unit_hours * weight
    return {tenant: value.quantize(_PLACES) for tenant, value in totals.items()}


def accrue(
    usage: DecayedUsage,
    *,
    lines: Iterable[ChargeLine],
    now: datetime,
    half_life: timedelta = DEFAULT_HALF_LIFE,
) -> DecayedUsage:
    """Decay a running value to `now` and add new lines, so the feed needs no full history."""
    value = usage.value * decay_factor(age=now - usage.as_of, half_life=half_life)
    fresh = decayed_usage(
        (ln for ln in lines if ln.tenant_id == usage.tenant_id), now=now, half_life=half_life
    )
    return DecayedUsage(
        tenant_id=usage.tenant_id,
        value=(value + fresh.get(usage.tenant_id, Decimal(0))).quantize(_PLACES),
        as_of=now,
    )
