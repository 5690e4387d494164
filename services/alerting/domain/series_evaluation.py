"""Rule evaluation per series (one GPU's label set): pure functions from (state, sample, now) to transitions.

The handler keeps one `SeriesState` per series key and calls `evaluate` for each sample and `tick` on a
timer; a `None` state from `tick` means the series went stale and can be forgotten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from pydantic import AwareDatetime, BaseModel, ConfigDict

from services.alerting.domain.alert_lifecycle import (
    AlertState,
    EvaluationConfig,
    Transition,
    TransitionKind,
    expire,
    gone,
    observe,
    transition,
)
from services.alerting.domain.alerts import fingerprint
from services.alerting.domain.counters import CounterPoint, increase, record
from services.alerting.domain.matchers import matches_all
from services.alerting.domain.rules import Rule, RuleBook, RuleKind

__all__ = ["Sample", "SeriesState", "Step", "evaluate", "left_batch", "retire_rule", "series_key", "tick"]

_DEFAULTS = EvaluationConfig()


class Sample(BaseModel):
    """One telemetry sample: a GPU's labels and its field values at one instant."""

    model_config = ConfigDict(frozen=True)

    labels: dict[str, str]
    values: dict[str, float]


class SeriesState(BaseModel):
    """Everything evaluation remembers about one series: its alerts (by rule) and counter windows."""

    model_config = ConfigDict(frozen=True)

    labels: dict[str, str]
    last_seen: AwareDatetime
    alerts: dict[str, AlertState] = {}
    counters: dict[str, tuple[CounterPoint, ...]] = {}


class Step(BaseModel):
    """Result of one evaluation: the new state (None = forget the series) and what changed."""

    model_config = ConfigDict(frozen=True)

    state: SeriesState | None
    transitions: tuple[Transition, ...] = ()


def series_key(labels: Mapping[str, str]) -> str:
    """Identity of a series: the fingerprint of its full label set."""
    return fingerprint(labels)


def evaluate(*, state: SeriesState | None, sample: Sample, rules: Sequence[Rule], now: datetime) -> Step:
    """Evaluate every applicable rule against one sample of this series."""
    counters = _record_counters(state, sample, rules, now)
    alerts = dict(state.alerts) if state else {}
    changes: list[Transition] = []
    for rule in rules:
        if rule.kind is RuleKind.ABSENT or not rule.owns(sample.labels):
            continue  # another tenant's rule of the same name must not touch this series' alert
        observed = _observe_value(rule, sample, counters, now)
        if observed is None:
            continue  # no reading for this metric: nothing learned; staleness handles silence
        holds = matches_all(rule.scope(), sample.labels) and rule.condition(observed)
        outcome = observe(rule, alerts.get(rule.name), holds=holds, value=observed, now=now)
        _apply(rule, alerts, changes, sample.labels, now, outcome)
    new = SeriesState(labels=sample.labels, last_seen=now, alerts=alerts, counters=counters)
    return Step(state=new, transitions=tuple(changes))


def tick(*, state: SeriesState, rules: Sequence[Rule], now: datetime, config: EvaluationConfig) -> Step:
    """Advance timers without a sample: `for`, keep_firing_for, staleness and removed rules."""
    book = RuleBook(rules)
    alerts = dict(state.alerts)
    changes: list[Transition] = []
    for name, current in state.alerts.items():
        rule = book.get(name, state.labels)
        if rule is None:
            alerts.pop(name)  # retire_rule() resolves a deleted rule's alerts; here we only forget them
            continue
        _apply(rule, alerts, changes, state.labels, now, expire(rule, current, now=now, config=config))
    if not alerts and now - state.last_seen >= config.staleness:
        return Step(state=None, transitions=tuple(changes))
    return Step(state=state.model_copy(update={"alerts": alerts}), transitions=tuple(changes))


def left_batch(*, state: SeriesState, rules: Sequence[Rule], at: datetime) -> Step:
    """The series was missing from its node's batch at ``at``: every alert it holds sees it gone."""
    book = RuleBook(rules)
    alerts = dict(state.alerts)
    changes: list[Transition] = []
    for name, current in state.alerts.items():
        rule = book.get(name, state.labels)
        if rule is not None and rule.kind is not RuleKind.ABSENT:
            _apply(rule, alerts, changes, state.labels, at, gone(rule, current, at=at))
    return Step(state=state.model_copy(update={"alerts": alerts}), transitions=tuple(changes))


def retire_rule(*, state: SeriesState, rule: Rule, now: datetime) -> Step:
    """Resolve this series' alert for a rule being deleted or replaced, so nothing stays firing."""
    alerts = dict(state.alerts)
    changes: list[Transition] = []
    current = alerts.get(rule.name)
    if current is not None:
        _apply(rule, alerts, changes, state.labels, now, expire(None, current, now=now, config=_DEFAULTS))
    return Step(state=state.model_copy(update={"alerts": alerts}), transitions=tuple(changes))


def _apply(
    rule: Rule,
    alerts: dict[str, AlertState],
    changes: list[Transition],
    series: Mapping[str, str],
    now: datetime,
    outcome: tuple[AlertState | None, TransitionKind | None],
) -> None:
    new, kind = outcome
    previous = alerts.pop(rule.name, None)
    if new is not None:
        alerts[rule.name] = new
    subject = new or previous
    if kind is not None and subject is not None:
        changes.append(transition(kind, rule=rule, series=series, state=subject, now=now))


def _observe_value(
    rule: Rule, sample: Sample, counters: Mapping[str, tuple[CounterPoint, ...]], now: datetime
) -> float | None:
    if rule.metric not in sample.values:
        return None
    if rule.kind is RuleKind.INCREASE and rule.window is not None:
        return increase(counters.get(rule.metric, ()), since=now - rule.window)
    return sample.values[rule.metric]


def _record_counters(
    state: SeriesState | None, sample: Sample, rules: Sequence[Rule], now: datetime
) -> dict[str, tuple[CounterPoint, ...]]:
    counters = dict(state.counters) if state else {}
    windows: dict[str, list[float]] = {}
    for rule in rules:
        if rule.window is not None and rule.metric in sample.values:
            windows.setdefault(rule.metric, []).append(rule.window.total_seconds())
    for metric, seconds in windows.items():
        keep = max(seconds)
        points = counters.get(metric, ())
        counters[metric] = record(points, at=now, value=sample.values[metric], keep=timedelta(seconds=keep))
    return counters
