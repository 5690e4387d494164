"""Recovery SLO statistics: time to detect, time to recover, and share recovered within 1 and 3 minutes.

The measure runs from detection (recovery learning of the fault) to running again: the host's instant the
last affected workload ran on its new placement (``Incident.recovered_at``, from the agents' running
steps). Only incidents that affected a workload are measured: with nothing to move there is nothing to
recover. An incident not recovered counts as a miss of a threshold once that long has passed since its
detection; before then it is not judged yet.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from services.recovery.domain.incidents import Incident

__all__ = [
    "ONE_MINUTE",
    "THREE_MINUTES",
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

    incidents: int = Field(ge=0, description="Incidents whose fault happened in the window")
    measured: int = Field(ge=0, description="Of them, those that affected a workload: the SLO's population")
    recovered: int = Field(ge=0, description="Measured incidents whose every workload ran again")
    detect_p50_s: float | None = Field(description="Fault to detection, median, over all incidents")
    detect_p99_s: float | None
    recover_p50_s: float | None = Field(description="Detection to running again, median, recovered only")
    recover_p99_s: float | None
    share_within_1m: float | None = Field(
        description="Measured incidents running again within 1 minute of detection / those judged at 1 min"
    )
    share_within_3m: float | None = Field(
        description="Measured incidents running again within 3 minutes of detection / those judged at 3 min"
    )


def time_to_detect(incident: Incident) -> timedelta:
    """From the fault happening to recovery knowing of it (never negative, despite clock skew)."""
    return max(incident.detected_at - incident.fault_at, timedelta(0))


def time_to_recover(incident: Incident) -> timedelta | None:
    """From detection to every workload running again (never negative); None while that has not happened."""
    if incident.recovered_at is None:
        return None
    return max(incident.recovered_at - incident.detected_at, timedelta(0))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0 < q <= 100) by nearest rank: always a value that was observed."""
    if not values:
        return None
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} is outside (0, 100]")
    ordered = sorted(values)
    return ordered[math.ceil(q / 100 * len(ordered)) - 1]


def _share(measured: Sequence[Incident], limit: timedelta, as_of: datetime | None) -> float | None:
    """Recovered within limit / judged: recovered, or limit gone by since detection (always, as_of None)."""
    hits = judged = 0
    for incident in measured:
        took = time_to_recover(incident)
        if took is None and as_of is not None and as_of - incident.detected_at < limit:
            continue  # still recovering and not late yet: neither a hit nor a miss
        judged += 1
        hits += took is not None and took <= limit
    return hits / judged if judged else None


def summarize(incidents: Iterable[Incident], *, as_of: datetime | None = None) -> SloStats:
    """SLO figures over the given incidents, judged as of ``as_of`` (None: every open one is late)."""
    chosen = list(incidents)
    measured = [i for i in chosen if i.workload_ids]
    detect = [time_to_detect(i).total_seconds() for i in chosen]
    recovered = [t.total_seconds() for i in measured if (t := time_to_recover(i)) is not None]
    return SloStats(
        incidents=len(chosen),
        measured=len(measured),
        recovered=len(recovered),
        detect_p50_s=percentile(detect, 50),
        detect_p99_s=percentile(detect, 99),
        recover_p50_s=percentile(recovered, 50),
        recover_p99_s=percentile(recovered, 99),
        share_within_1m=_share(measured, ONE_MINUTE, as_of),
        share_within_3m=_share(measured, THREE_MINUTES, as_of),
    )


def _grouped(
    incidents: Iterable[Incident], key: Callable[[Incident], K], *, as_of: datetime | None = None
) -> dict[K, SloStats]:
    groups: defaultdict[K, list[Incident]] = defaultdict(list)
    for incident in incidents:
        groups[key(incident)].append(incident)
    ordered = sorted(groups.items(), key=lambda kv: str(kv[0]))
    return {k: summarize(group, as_of=as_of) for k, group in ordered}


def by_fault_type(incidents: Iterable[Incident], *, as_of: datetime | None = None) -> Mapping[str, SloStats]:
    """SLO figures per fault class (the catalog's fault type key), judged as ``summarize`` judges."""
    return _grouped(incidents, lambda i: i.fault_type, as_of=as_of)


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
