"""The evaluator's in-memory state for every series, node, event alert and group, and what changed.

Pure: time is passed in and no IO happens. The evaluator loop feeds samples, signals and ticks,
then `drain()`s the changes to persist in one transaction (state rows, alert events, notifications).
Only transitions dirty a series, so a steady 1 Hz stream with nothing breaching writes nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import AwareDatetime, BaseModel, ConfigDict

from services.alerting.absence import NODE_LABELS, NodeState, observe_node, tick_node
from services.alerting.alerts import Alert, AlertStatus, fingerprint
from services.alerting.counters import CounterPoint
from services.alerting.evaluation import Sample, SeriesState, evaluate, retire_rule, series_key, tick
from services.alerting.grouping import AlertGroup, Groups, Notification, due_notifications, ingest
from services.alerting.inhibition import DEFAULT_INHIBIT_RULES, InhibitRule, muter
from services.alerting.matchers import Matcher, matches_all
from services.alerting.routing import RoutingTree
from services.alerting.rules import GPU_LOST_METRIC, Comparator, Rule, RuleKind
from services.alerting.samples import Reading, identity, reading_labels, to_sample, value_fields
from services.alerting.signals import Signal, SignalKind
from services.alerting.silences import Silence
from services.alerting.state import EvaluationConfig, Phase, Transition, TransitionKind, transition

__all__ = ["Changes", "Engine", "EventAlert"]

_NOTIFIED = (TransitionKind.FIRING, TransitionKind.RESOLVED)
# Comparators under which a flat counter (increase shrinking towards 0) cannot start to hold.
_GROWTH = (Comparator.GT, Comparator.GE)


_Thresholds = tuple[tuple[str, Callable[[float], bool]], ...]
_Counters = tuple[tuple[str, bool, bool], ...]
_Checks = tuple[_Thresholds, _Counters, bool]


@dataclass(frozen=True, slots=True)
class _Plan:
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


class EventAlert(BaseModel):
    """A firing alert raised by an event; it resolves at `expires_at` unless the event repeats."""

    model_config = ConfigDict(frozen=True)

    rule: str
    alert: Alert
    expires_at: AwareDatetime


@dataclass
class Changes:
    """Everything to write in one transaction; `None` values mean delete the row."""

    transitions: list[Transition] = field(default_factory=list)
    series: dict[str, SeriesState | None] = field(default_factory=dict)
    nodes: dict[str, NodeState | None] = field(default_factory=dict)
    events: dict[str, EventAlert | None] = field(default_factory=dict)
    groups: dict[str, AlertGroup | None] = field(default_factory=dict)
    notifications: list[Notification] = field(default_factory=list)

    def empty(self) -> bool:
        """Nothing to write."""
        return not (self.transitions or self.series or self.nodes or self.events or self.groups)


class Engine:
    """Single-writer evaluation state; restored from Postgres at start, then kept in memory."""

    def __init__(
        self,
        *,
        tree: RoutingTree,
        config: EvaluationConfig,
        event_ttl: timedelta,
        inhibit_rules: Sequence[InhibitRule] = DEFAULT_INHIBIT_RULES,
    ) -> None:
        self.tree = tree
        self.rules: tuple[Rule, ...] = ()
        self.silences: tuple[Silence, ...] = ()
        self._config, self._event_ttl, self._inhibit = config, event_ttl, tuple(inhibit_rules)
        self.series: dict[str, SeriesState] = {}
        self.nodes: dict[str, NodeState] = {}
        self.events: dict[str, EventAlert] = {}
        self.groups: Groups = {}
        self.firing: dict[str, Alert] = {}
        self._watermarks: dict[str, datetime] = {}
        self._gpu_series: dict[str, str] = {}
        self._persisted_groups: Groups = {}
        self._keys: dict[tuple[tuple[str, str], ...], str] = {}
        self._seen: dict[str, datetime] = {}
        self._applicable: dict[str, tuple[Rule, ...]] = {}
        self._sample_rules: tuple[Rule, ...] = ()
        self._by_name: dict[str, Rule] = {}
        self._windows: dict[str, float] = {}
        self._value_fields: tuple[str, ...] = ()
        self._absent_for: timedelta | None = None
        self._plans: dict[tuple[str, str, str, str | None, str | None], _Plan] = {}
        self._scoped: tuple[tuple[Rule, tuple[Matcher, ...]], ...] = ()
        self._checks: dict[tuple[str, ...], _Checks] = {}
        self._node_seen: dict[str, datetime] = {}
        # Series holding an alert (what tick() must look at), and when pending alerts come due.
        self._alerting: dict[str, None] = {}  # a dict: ordered, so ticks are deterministic
        self._due: list[tuple[datetime, str]] = []
        self._due_at: dict[str, datetime] = {}
        self.metrics: frozenset[str] = frozenset()
        self._changes = Changes()

    def restore(
        self,
        *,
        series: Mapping[str, SeriesState],
        nodes: Mapping[str, NodeState],
        events: Mapping[str, EventAlert],
        groups: Mapping[str, AlertGroup],
        now: datetime,
    ) -> None:
        """Load persisted state; staleness counts from `now`, as samples sent while down are unknown."""
        for key, state in series.items():
            # Samples at or before the persisted instant were applied before the restart: skip them.
            self._watermarks[key] = state.last_seen
            self.series[key] = _refreshed(state, now)
            self._gpu_series[state.labels.get("gpu", "")] = key
            self._track(key, self.series[key])
        self.nodes = {k: n.model_copy(update={"last_seen": max(n.last_seen, now)}) for k, n in nodes.items()}
        self._node_seen.clear()
        self.events = dict(events)
        self.groups = dict(groups)
        self._persisted_groups = dict(groups)
        self.firing = {
            fp: a for g in groups.values() for fp, a in g.alerts.items() if a.status is AlertStatus.FIRING
        }

    def configure(
        self, *, rules: Sequence[Rule], tree: RoutingTree, silences: Sequence[Silence], now: datetime
    ) -> None:
        """Swap in new configuration; alerts of deleted or changed rules resolve."""
        kept = {r.name: r for r in rules}
        gone = [r for r in self.rules if kept.get(r.name) != r]
        self.rules, self.tree, self.silences = tuple(rules), tree, tuple(silences)
        self._sample_rules = tuple(r for r in rules if r.kind is not RuleKind.ABSENT)
        self._by_name = {r.name: r for r in rules}
        self.metrics = frozenset(r.metric for r in rules)
        self._value_fields = value_fields(self.metrics)
        self._windows = {}
        for r in self._sample_rules:
            if r.window is not None:
                seconds = r.window.total_seconds()
                self._windows[r.metric] = max(seconds, self._windows.get(r.metric, seconds))
        absent = [r.for_duration for r in rules if r.kind is RuleKind.ABSENT]
        self._absent_for = min(absent) if absent else None
        self._applicable.clear()
        self._plans.clear()
        self._checks.clear()
        self._scoped = tuple((r, r.scope()) for r in self._sample_rules)
        for key in self._alerting:  # `for` durations may have changed
            self._schedule(key, self.series[key])
        for rule in gone:
            for key, state in list(self.series.items()):
                if rule.name in state.alerts:
                    step = retire_rule(state=state, rule=rule, now=now)
                    self._apply_series(key, step.state, step.transitions, now)
            self._retire_node_rule(rule, now)

    def observe(self, *, node: str, at: datetime, samples: Sequence[Sample], now: datetime) -> int:
        """Evaluate one node's batch taken at `at`; returns how many samples were evaluated."""
        done = 0
        for sample in samples:
            key = self._key(sample.labels)
            mark = self._watermarks.get(key)
            if mark is not None:
                if at <= mark:
                    continue  # redelivered: this sample's effects are already persisted
                del self._watermarks[key]
            done += 1
            state = self.series.get(key)
            if state is not None and self._quiet(key, state, sample):
                self._seen[key] = at  # nothing can change but the time it was last seen
                continue
            step = evaluate(state=self._current(key), sample=sample, rules=self._sample_rules, now=at)
            self._apply_series(key, step.state, step.transitions, now)
            self._gpu_series[sample.labels.get("gpu", "")] = key
        if samples:
            self._observe_node(node, samples[0], at, now)
        return done

    def observe_readings(self, *, node: str, at: datetime, readings: Sequence[Reading], now: datetime) -> int:
        """`observe` for decoded wire readings (see samples.py): the hot path.

        A sample that cannot change anything (no alert held, no applicable rule holds, counters
        flat) only records when its series was last seen; nothing is allocated for it.
        """
        plans, series, seen, marks = self._plans, self.series, self._seen, self._watermarks
        done, first = 0, None
        for reading in readings:
            plan = plans.get(identity(node, reading))
            if plan is None:
                plan = self._plan(node, reading)
            if first is None:
                first = plan
            key = plan.key
            if marks:
                mark = marks.get(key)
                if mark is not None:
                    if at <= mark:
                        continue  # redelivered: this sample's effects are already persisted
                    del marks[key]
            done += 1
            state = series.get(key)
            quiet = not plan.loud and (state is None or not state.alerts)
            if quiet and self._quiet_reading(plan, state, reading):
                if state is None:
                    self._start(plan, reading, at)
                else:
                    seen[key] = at  # nothing can change but the time it was last seen
                continue
            sample = to_sample(labels=plan.labels, reading=reading, fields=self._value_fields)
            step = evaluate(state=self._current(key), sample=sample, rules=self._sample_rules, now=at)
            self._apply_series(key, step.state, step.transitions, now)
            self._gpu_series[plan.labels.get("gpu", "")] = key
        if first is not None:
            known = self.nodes.get(node)
            if known is not None and not known.alerts and known.labels == first.node_labels:
                self._node_seen[node] = at  # a live node with nothing firing: only its last-seen moves
            else:
                self._observe_node(node, Sample.model_construct(labels=first.labels, values={}), at, now)
        return done

    def _plan(self, node: str, reading: Reading) -> _Plan:
        labels = reading_labels(node, reading)
        applicable = [r for r, scope in self._scoped if matches_all(scope, labels)]
        names = tuple(r.name for r in applicable)
        checks = self._checks.get(names)
        if checks is None:  # series with the same applicable rules share their checks
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
            checks = self._checks[names] = (tuple(thresholds), tuple(counters), loud)
        plan = _Plan(
            key=self._key(labels),
            labels=labels,
            node_labels={k: labels[k] for k in NODE_LABELS if k in labels},
            thresholds=checks[0],
            counters=checks[1],
            loud=checks[2],
        )
        self._plans[identity(node, reading)] = plan
        return plan

    @staticmethod
    def _quiet_reading(plan: _Plan, state: SeriesState | None, reading: Reading) -> bool:
        """True when evaluate() could only record the sample: no applicable rule can start to hold."""
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

    def _start(self, plan: _Plan, reading: Reading, at: datetime) -> None:
        """A new series whose first sample holds nothing: what evaluate() would build, built directly."""
        counters: dict[str, tuple[CounterPoint, ...]] = {
            metric: (CounterPoint.model_construct(at=at, value=float(value)),)
            for metric in self._windows
            if (value := 0.0 if metric == GPU_LOST_METRIC else reading.get(metric)) is not None
        }
        state = SeriesState.model_construct(labels=plan.labels, last_seen=at, alerts={}, counters=counters)
        self.series[plan.key] = state
        self._gpu_series[plan.labels.get("gpu", "")] = plan.key

    def _key(self, labels: Mapping[str, str]) -> str:
        # Labels arrive in a fixed order per series, so their items identify it without hashing JSON.
        items = tuple(labels.items())
        key = self._keys.get(items)
        if key is None:
            key = self._keys[items] = series_key(labels)
        return key

    def _quiet(self, key: str, state: SeriesState, sample: Sample) -> bool:
        """True when evaluate() could only move last_seen: no alert held, no rule holds, counters flat."""
        if state.alerts:
            return False
        applicable = self._applicable.get(key)
        if applicable is None:
            applicable = self._applicable[key] = tuple(
                r for r in self._sample_rules if matches_all(r.scope(), state.labels)
            )
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

    def _current(self, key: str) -> SeriesState | None:
        state, seen = self.series.get(key), self._seen.pop(key, None)
        if state is not None and seen is not None and seen > state.last_seen:
            state = self.series[key] = state.model_copy(update={"last_seen": seen})
        return state

    def signal(self, signal: Signal, *, now: datetime) -> None:
        """Apply an event-raised signal (already deduplicated by the consumer's inbox)."""
        if signal.kind is SignalKind.GPU_LOST:
            key = self._gpu_series.get(signal.labels.get("gpu", ""))
            labels = self.series[key].labels if key in self.series else signal.labels
            sample = Sample(labels=labels, values={GPU_LOST_METRIC: 1.0})
            self.observe(node=labels.get("node", ""), at=signal.at, samples=[sample], now=now)
            return
        self._raise_event(signal, now)

    def tick(self, *, now: datetime) -> None:
        """Advance `for`, keep_firing_for, staleness, absence and event-alert timers, then flush groups."""
        for key in list(self._alerting):
            self._tick_series(key, now)
        horizon = now - self._config.staleness
        seen = self._seen
        # A series without alerts only goes stale (forgotten, nothing to notify).
        stale = [
            key
            for key, state in self.series.items()
            if state.last_seen <= horizon and seen.get(key, state.last_seen) <= horizon and not state.alerts
        ]
        for key in stale:
            self._tick_series(key, now)
        quiet = min(self._config.silent_expiry, self._absent_for or self._config.silent_expiry)
        seen_nodes = self._node_seen
        for name in [n for n, s in self.nodes.items() if now - seen_nodes.get(n, s.last_seen) >= quiet]:
            node_step = tick_node(state=self._node(name), rules=self.rules, now=now, config=self._config)
            self._apply_node(name, node_step.state, node_step.transitions, now)
        for fp, event in list(self.events.items()):
            if now >= event.expires_at:
                del self.events[fp]
                self._changes.events[fp] = None
                resolved = event.alert.model_copy(update={"ends_at": now})
                ended = Transition(kind=TransitionKind.RESOLVED, rule=event.rule, at=now, alert=resolved)
                self._emit([ended], now)
        self.flush(now=now)

    def advance(self, *, now: datetime) -> None:
        """Between ticks: promote the pending alerts whose `for` has elapsed by `now`, then flush.

        Cheap (only series whose timer is due are looked at), so the evaluator calls it after every
        slice of samples and a page does not wait for the next tick.
        """
        due, due_at = self._due, self._due_at
        while due and due[0][0] <= now:
            when, key = heapq.heappop(due)
            if due_at.get(key) == when:
                del due_at[key]
                if key in self._alerting:
                    self._tick_series(key, now)
        self.flush(now=now)

    def _tick_series(self, key: str, now: datetime) -> None:
        current = self._current(key)
        assert current is not None
        step = tick(state=current, rules=self.rules, now=now, config=self._config)
        self._apply_series(key, step.state, step.transitions, now)

    def _track(self, key: str, state: SeriesState | None) -> None:
        """Keep the set of alert-holding series and the pending timers in step with a series' state."""
        if state is not None and state.alerts:
            self._alerting[key] = None
            self._schedule(key, state)
        else:
            self._alerting.pop(key, None)
            self._due_at.pop(key, None)

    def _schedule(self, key: str, state: SeriesState) -> None:
        pending = [
            alert.active_at + rule.for_duration
            for name, alert in state.alerts.items()
            if alert.phase is Phase.PENDING and (rule := self._by_name.get(name)) is not None
        ]
        when = min(pending) if pending else None
        if when is None:
            self._due_at.pop(key, None)
        elif self._due_at.get(key) != when:
            self._due_at[key] = when
            heapq.heappush(self._due, (when, key))

    def flush(self, *, now: datetime) -> None:
        """Send what group timers say is due, muting silenced and inhibited alerts."""
        if not self.groups:
            return
        firing = self.firing.values()
        mute = muter(silences=self.silences, inhibit_rules=self._inhibit, firing=firing, now=now)
        self.groups, sent = due_notifications(self.groups, now=now, muted=mute)
        self._changes.notifications.extend(sent)

    def drain(self) -> Changes:
        """The changes since the last drain (the caller persists them), and start afresh."""
        changes, self._changes = self._changes, Changes()
        for key, group in self.groups.items():
            if self._persisted_groups.get(key) is not group:
                changes.groups[key] = group
        changes.groups.update({k: None for k in self._persisted_groups if k not in self.groups})
        self._persisted_groups = dict(self.groups)
        return changes

    def _apply_series(
        self, key: str, state: SeriesState | None, transitions: Iterable[Transition], now: datetime
    ) -> None:
        if state is None:
            self.series.pop(key, None)
            self._seen.pop(key, None)
            self._applicable.pop(key, None)
        else:
            self.series[key] = state
        self._track(key, state)
        changed = list(transitions)
        if changed:
            # Only an alert-holding series is worth a row; the rest restarts from the next sample.
            self._changes.series[key] = state if state is not None and state.alerts else None
            self._emit(changed, now)

    def _node(self, name: str) -> NodeState:
        """The node's state with the last-seen instant the hot path kept aside folded in."""
        state, seen = self.nodes[name], self._node_seen.pop(name, None)
        if seen is not None:
            state = self.nodes[name] = state.model_copy(update={"last_seen": seen})
        return state

    def _observe_node(self, node: str, sample: Sample, at: datetime, now: datetime) -> None:
        self._node_seen.pop(node, None)
        known = node in self.nodes
        step = observe_node(state=self.nodes.get(node), sample=sample, rules=self.rules, now=at)
        self._apply_node(node, step.state, step.transitions, now)
        if not known and step.state is not None:
            self._changes.nodes[node] = step.state  # remembered so silence is noticed after a restart

    def _apply_node(
        self, name: str, state: NodeState | None, transitions: Iterable[Transition], now: datetime
    ) -> None:
        if state is None:
            self.nodes.pop(name, None)
            self._node_seen.pop(name, None)
            self._changes.nodes[name] = None
        else:
            self.nodes[name] = state
        changed = list(transitions)
        if changed:
            self._changes.nodes[name] = state
            self._emit(changed, now)

    def _retire_node_rule(self, rule: Rule, now: datetime) -> None:
        for name, node in list(self.nodes.items()):
            alert = node.alerts.get(rule.name)
            if alert is None:
                continue
            node = self._node(name)
            alerts = {k: v for k, v in node.alerts.items() if k != rule.name}
            ended = transition(TransitionKind.RESOLVED, rule=rule, series=node.labels, state=alert, now=now)
            self._apply_node(name, node.model_copy(update={"alerts": alerts}), [ended], now)

    def _raise_event(self, signal: Signal, now: datetime) -> None:
        labels = {**signal.labels, "alertname": signal.name, "severity": signal.severity.value}
        fp = fingerprint(labels)
        expires = max(signal.at, now) + self._event_ttl
        current = self.events.get(fp)
        if current is not None:
            self.events[fp] = current.model_copy(update={"expires_at": expires})
            self._changes.events[fp] = self.events[fp]
            return
        alert = Alert(
            fingerprint=fp, labels=labels, annotations={"summary": signal.summary}, starts_at=signal.at
        )
        self.events[fp] = EventAlert(rule=signal.name, alert=alert, expires_at=expires)
        self._changes.events[fp] = self.events[fp]
        self._emit([Transition(kind=TransitionKind.FIRING, rule=signal.name, at=signal.at, alert=alert)], now)

    def _emit(self, transitions: Sequence[Transition], now: datetime) -> None:
        self._changes.transitions.extend(transitions)
        for change in transitions:
            if change.kind not in _NOTIFIED:
                continue
            if change.kind is TransitionKind.FIRING:
                self.firing[change.alert.fingerprint] = change.alert
            else:
                self.firing.pop(change.alert.fingerprint, None)
            self.groups = ingest(self.groups, alert=change.alert, tree=self.tree, now=now)


def _refreshed(state: SeriesState, now: datetime) -> SeriesState:
    alerts = {n: a.model_copy(update={"last_seen": max(a.last_seen, now)}) for n, a in state.alerts.items()}
    return state.model_copy(update={"last_seen": max(state.last_seen, now), "alerts": alerts})
