"""Recovery SLO statistics: time to detect, time to recover, and share recovered within 1 and 3 minutes."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from services.recovery.domain.incidents import Incident

__all__ = [
    "SloStats",
    "by_fault_type",
    "by_period",
    "percentile",
    "summarize",
    "time_to_detect",
    "time_to_recover",
]

ONE_MINUTE = timedelta(minutes=1)
THREE_MINUTES = timedelta(minutes=3)

K = TypeVar("K", bound=Hashable)


class SloStats(BaseModel):
    """SLO figures over a set of incidents; durations in seconds, None when there is nothing to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    incidents: int = Field(ge=0)
    recovered: int = Field(ge=0)
    detect_p50_s: float | None
    detect_p99_s: float | None
    recover_p50_s: float | None
    recover_p99_s: float | None
    share_within_1m: float | None = Field(description="Recovered within 1 minute of detection / incidents")
    share_within_3m: float | None = Field(description="Recovered within 3 minutes of detection / incidents")


def time_to_detect(incident: Incident) -> timedelta:
    """From the fault happening to recovery knowing of it (never negative, despite clock skew)."""
    return max(incident.detected_at - incident.fault_at, timedelta(0))


def time_to_recover(incident: Incident) -> timedelta | None:
    """From detection to every workload running again; None while that has not happened."""
    if incident.recovered_at is None:
        return None
    return incident.recovered_at - incident.detected_at


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0 < q <= 100) by nearest rank: always a value that was observed."""
    if not values:
        return None
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} is outside (0, 100]")
    ordered = sorted(values)
    return ordered[math.ceil(q / 100 * len(ordered)) - 1]


def _share(recover_times: Sequence[timedelta | None], limit: timedelta, total: int) -> float | None:
    # Unrecovered incidents stay in the denominator: an incident still open has not met the SLO.
    if total == 0:
        return None
    return sum(1 for t in recover_times if t is not None and t <= limit) / total


def summarize(incidents: Iterable[Incident]) -> SloStats:
    """SLO figures over the given incidents."""
    chosen = list(incidents)
    detect = [time_to_detect(i).total_seconds() for i in chosen]
    recover_times = [time_to_recover(i) for i in chosen]
    recovered = [t.total_seconds() for t in recover_times if t is not None]
    return SloStats(
        incidents=len(chosen),
        recovered=len(recovered),
        detect_p50_s=percentile(detect, 50),
        detect_p99_s=percentile(detect, 99),
        recover_p50_s=percentile(recovered, 50),
        recover_p99_s=percentile(recovered, 99),
        share_within_1m=_share(recover_times, ONE_MINUTE, len(chosen)),
        share_within_3m=_share(recover_times, THREE_MINUTES, len(chosen)),
    )


def _grouped(incidents: Iterable[Incident], key: Callable[[Incident], K]) -> dict[K, SloStats]:
    groups: defaultdict[K, list[Incident]] = defaultdict(list)
    for incident in incidents:
        groups[key(incident)].append(incident)
    return {k: summarize(group) for k, group in groups.items()}


def by_fault_type(incidents: Iterable[Incident]) -> Mapping[str, SloStats]:
    """SLO figures per fault type key."""
    return _grouped(incidents, lambda i: i.fault_type)


def by_period(
    incidents: Iterable[Incident], *, origin: datetime, period: timedelta
) -> Mapping[datetime, SloStats]:
    """SLO figures per period (e.g. hour or day) starting at origin, keyed by each period's start.

    Incidents count in the period their fault happened in; incidents before origin are left out.
    """
    if period <= timedelta(0):
        raise ValueError("period must be positive")
    after = [i for i in incidents if i.fault_at >= origin]
    return _grouped(after, lambda i: origin + period * ((i.fault_at - origin) // period))
