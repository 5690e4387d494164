"""The hot path's per-series plans: which samples cannot change anything, decided without evaluating.

A sample that cannot change anything (no alert held, no applicable rule holds, counters flat) only
records when its series was last seen; these checks say so from the applicable rules alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from services.alerting.domain.counters import CounterPoint
from services.alerting.domain.rules import GPU_LOST_METRIC, Comparator, Rule, RuleKind
from services.alerting.domain.samples import Reading
from services.alerting.domain.series_evaluation import Sample, SeriesState

__all__ = ["Checks", "Plan", "checks_for", "quiet_reading", "quiet_sample", "refreshed", "started"]

# Comparators under which a flat counter (increase shrinking towards 0) cannot start to hold.
_GROWTH = (Comparator.GT, Comparator.GE)

_Thresholds = tuple[tuple[str, Callable[[float], bool]], ...]
_Counters = tuple[tuple[str, bool, bool], ...]
Checks = tuple[_Thresholds, _Counters, bool]


@dataclass(frozen=True, slots=True)
class Plan:
    """What the hot path needs about one series, built once per series and configuration.

    `thresholds`: (metric, compiled condition) of the applicable threshold rules; `counters`:
    (metric, condition holds on an increase of 0, comparator is a growth one) of the applicable
    increase rules; `loud`: some applicable rule holds on a value every sample carries (gpu_lost=0),
    so every sample is evaluated in full.
    """

    key: str
    labels: dict[str, str]
    node_labels: dict[str, str]
    thresholds: _Thresholds
    counters: _Counters
    loud: bool


def checks_for(applicable: Iterable[Rule]) -> Checks:
    """The checks of a set of applicable rules (series with the same applicable rules share them)."""
    thresholds: list[tuple[str, Callable[[float], bool]]] = []
    counters: list[tuple[str, bool, bool]] = []
    loud = False
    for rule in applicable:
        if rule.metric == GPU_LOST_METRIC:  # every sample carries gpu_lost=0
            loud = loud or rule.kind is RuleKind.INCREASE or rule.condition(0.0)
        elif rule.kind is RuleKind.INCREASE:
            counters.append((rule.metric, rule.condition(0.0), rule.comparator in _GROWTH))
        else:
            thresholds.append((rule.metric, rule.compiled_condition()))
    return (tuple(thresholds), tuple(counters), loud)


def quiet_reading(plan: Plan, state: SeriesState | None, reading: Reading) -> bool:
    """True when evaluate() could only record the sample: no applicable rule can start to hold."""
    if reading.get("lost_reason"):
        return False  # rare, and its gpu_lost is 1: the GpuLost rule may start to hold
    for metric, holds in plan.thresholds:
        value = reading.get(metric)
        if value is not None and holds(value):
            return False
    for metric, holds_at_zero, growth in plan.counters:
        value = reading.get(metric)
        if value is None:
            continue
        points = state.counters.get(metric) if state is not None else None
        if not points:
            if holds_at_zero or state is not None:  # a first point: increase() is 0
                return False
        elif points[-1].value != value or not growth:
            return False
    return True


def quiet_sample(applicable: Iterable[Rule], state: SeriesState, sample: Sample) -> bool:
    """True when no applicable rule holds on the sample and its counters stay flat (no alert held)."""
    for rule in applicable:
        value = sample.values.get(rule.metric)
        if value is None:
            continue
        if rule.kind is RuleKind.INCREASE:
            points = state.counters.get(rule.metric)
            if not points or points[-1].value != value or rule.comparator not in _GROWTH:
                return False
        elif rule.condition(value):
            return False
    return True


def started(plan: Plan, reading: Reading, at: datetime, windows: Iterable[str]) -> SeriesState:
    """A new series whose first sample holds nothing: what evaluate() would build, built directly."""
    counters: dict[str, tuple[CounterPoint, ...]] = {
        metric: (CounterPoint.model_construct(at=at, value=float(value)),)
        for metric in windows
        if (value := 0.0 if metric == GPU_LOST_METRIC else reading.get(metric)) is not None
    }
    return SeriesState.model_construct(labels=plan.labels, last_seen=at, alerts={}, counters=counters)


def refreshed(state: SeriesState, now: datetime) -> SeriesState:
    """A restored series: staleness counts from `now`, as samples sent while down are unknown."""
    alerts = {n: a.model_copy(update={"last_seen": max(a.last_seen, now)}) for n, a in state.alerts.items()}
    return state.model_copy(update={"last_seen": max(state.last_seen, now), "alerts": alerts})
