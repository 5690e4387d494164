"""The article's dynamic priority with Slurm-style decayed fair share.

priority = min(0.6 * urgency + 0.4 * (1 - fair_share), 1.0)

Numbers are floats: every input is validated into [0, 1] (or is a non-negative usage), the result is clamped
into [0, 1], and priorities are only ever compared, never summed into money, so float rounding (e.g.
0.6 + 0.4 * 1 landing a hair above 1.0) is harmless once clamped. Usage is compute-unit-hours.

Entitlement choice: a tenant's entitlement is `shares / total_shares * pool_capacity_units * window` with
`window = half_life / ln 2` hours. That window is the integral of the decay curve, so a tenant that uses
exactly its share of the pool, continuously, converges to decayed usage == entitlement, i.e. fair_share 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = [
    "FAIR_SHARE_WEIGHT",
    "URGENCY_WEIGHT",
    "DecayedUsage",
    "FairShareBook",
    "PriorityExplanation",
    "UsageRecord",
    "accrue",
    "decay_factor",
    "decayed_usage",
    "entitlement",
    "explain",
    "fair_share",
    "priority",
    "usage_at",
]

URGENCY_WEIGHT = 0.6
FAIR_SHARE_WEIGHT = 0.4
DEFAULT_HALF_LIFE = timedelta(days=7)  # Slurm's PriorityDecayHalfLife default


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """`amount` compute-unit-hours consumed, accounted at `at`."""

    amount: float
    at: datetime


@dataclass(frozen=True, slots=True)
class DecayedUsage:
    """Incremental accumulator: decayed usage `value` as of `as_of`."""

    value: float
    as_of: datetime


@dataclass(frozen=True, slots=True)
class PriorityExplanation:
    """Every term of one priority, like Slurm's sprio."""

    urgency: float
    urgency_term: float
    decayed_usage: float
    entitlement: float
    fair_share: float
    fair_share_term: float
    raw: float
    priority: float


def priority(*, urgency: float, fair_share: float) -> float:
    """The article's rule, with both inputs clamped into [0, 1] first."""
    u = min(max(urgency, 0.0), 1.0)
    fs = min(max(fair_share, 0.0), 1.0)
    return min(URGENCY_WEIGHT * u + FAIR_SHARE_WEIGHT * (1.0 - fs), 1.0)


def decay_factor(*, age: timedelta, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """How much of a usage `age` old still counts; future usage (clock skew) counts in full."""
    seconds = max(age.total_seconds(), 0.0)
    return float(0.5 ** (seconds / half_life.total_seconds()))


def decayed_usage(
    records: Iterable[UsageRecord], *, at: datetime, half_life: timedelta = DEFAULT_HALF_LIFE
) -> float:
    """Sum of usage records, each halved for every `half_life` of age at time `at`."""
    return sum(r.amount * decay_factor(age=at - r.at, half_life=half_life) for r in records)


def usage_at(acc: DecayedUsage, *, at: datetime, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """The accumulator's value decayed forward to `at`."""
    return acc.value * decay_factor(age=at - acc.as_of, half_life=half_life)


def accrue(
    acc: DecayedUsage, *, amount: float, at: datetime, half_life: timedelta = DEFAULT_HALF_LIFE
) -> DecayedUsage:
    """Decay the accumulator to `at`, then add `amount`: equal to decayed_usage over all records."""
    if at < acc.as_of:
        # Late records must not rewind the accumulator; decay them to as_of instead.
        late = amount * decay_factor(age=acc.as_of - at, half_life=half_life)
        return DecayedUsage(value=acc.value + late, as_of=acc.as_of)
    return DecayedUsage(value=usage_at(acc, at=at, half_life=half_life) + amount, as_of=at)


def entitlement(
    *, shares: float, total_shares: float, capacity_units: float, half_life: timedelta = DEFAULT_HALF_LIFE
) -> float:
    """Compute-unit-hours a tenant may use over the decay window (see module docstring)."""
    if total_shares <= 0 or shares <= 0:
        return 0.0
    window_h = half_life.total_seconds() / 3600.0 / math.log(2)
    return shares / total_shares * capacity_units * window_h


def fair_share(*, decayed: float, entitled: float) -> float:
    """Part of the entitlement already used, clamped to [0, 1]; no entitlement means fully used."""
    if entitled <= 0:
        return 1.0
    return min(max(decayed / entitled, 0.0), 1.0)


def explain(*, urgency: float, decayed: float, entitled: float) -> PriorityExplanation:
    """Each term of the priority for a workload of this urgency and a tenant with this usage."""
    fs = fair_share(decayed=decayed, entitled=entitled)
    u = min(max(urgency, 0.0), 1.0)
    u_term = URGENCY_WEIGHT * u
    fs_term = FAIR_SHARE_WEIGHT * (1.0 - fs)
    return PriorityExplanation(
        urgency=u,
        urgency_term=u_term,
        decayed_usage=decayed,
        entitlement=entitled,
        fair_share=fs,
        fair_share_term=fs_term,
        raw=u_term + fs_term,
        priority=priority(urgency=u, fair_share=fs),
    )


@dataclass(frozen=True, slots=True)
class FairShareBook:
    """Everything the priority rule needs about tenants at one moment."""

    usage: Mapping[str, DecayedUsage]
    shares: Mapping[str, float]
    tenants: frozenset[str]
    default_shares: float
    capacity_units: float
    half_life: timedelta
    now: datetime

    def shares_of(self, tenant: str) -> float:
        """A tenant's shares (the default when none were set)."""
        return self.shares.get(tenant, self.default_shares)

    def total_shares(self) -> float:
        """Shares of every known tenant."""
        return sum(self.shares_of(t) for t in self.tenants | set(self.shares))

    def decayed(self, tenant: str) -> float:
        """The tenant's decayed usage now."""
        acc = self.usage.get(tenant)
        return usage_at(acc, at=self.now, half_life=self.half_life) if acc else 0.0

    def explain(self, *, tenant: str, urgency: float) -> PriorityExplanation:
        """Every term of a priority for this tenant and urgency."""
        entitled = entitlement(
            shares=self.shares_of(tenant),
            total_shares=max(self.total_shares(), self.shares_of(tenant)),
            capacity_units=self.capacity_units,
            half_life=self.half_life,
        )
        return explain(urgency=urgency, decayed=self.decayed(tenant), entitled=entitled)
