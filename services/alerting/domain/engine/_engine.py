"""The engine's inputs: configuration, restored state, samples (the hot path), signals and ticks.

Pure: time is passed in and no IO happens. Only transitions dirty a series, so a steady 1 Hz
stream with nothing breaching writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from services.alerting.domain.absence import NODE_LABELS, NodeState, observe_node, tick_node
from services.alerting.domain.alert_lifecycle import Transition, TransitionKind, transition
from services.alerting.domain.alerts import Alert, AlertStatus, fingerprint
from services.alerting.domain.engine._changes import EventAlert
from services.alerting.domain.engine._plan import (
    Plan,
    checks_for,
    quiet_reading,
    quiet_sample,
    refreshed,
    started,
)
from services.alerting.domain.engine._state import EngineState
from services.alerting.domain.grouping import AlertGroup
from services.alerting.domain.inhibition import InhibitRule
from services.alerting.domain.matchers import matches_all
from services.alerting.domain.routing import RoutingTree
from services.alerting.domain.rules import (
    GPU_LOST_METRIC,
    XID_LABEL,
    EvaluationMode,
    Rule,
    RuleBook,
    RuleKind,
)
from services.alerting.domain.samples import (
    Reading,
    identity,
    reading_labels,
    to_sample,
    value_fields,
    xid_readings,
)
from services.alerting.domain.series_evaluation import (
    Sample,
    SeriesState,
    evaluate,
    left_batch,
    retire_rule,
    tick,
)
from services.alerting.domain.signals import Signal, SignalKind
from services.alerting.domain.silences import Silence

__all__ = ["Engine"]


class Engine(EngineState):
    """Single-writer evaluation state; restored from Postgres at start, then kept in memory."""

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
            self.series[key] = refreshed(state, now)
            if XID_LABEL not in state.labels:
                self._gpu_series[state.labels.get("gpu", "")] = key
            self._timers.track(key, self.series[key], self._by_name)
        self.nodes = {k: n.model_copy(update={"last_seen": max(n.last_seen, now)}) for k, n in nodes.items()}
        self._node_seen.clear()
        self._in_batch.clear()
        self.events = dict(events)
        self.groups = dict(groups)
        self._persisted_groups = dict(groups)
        self.firing = {
            fp: a for g in groups.values() for fp, a in g.alerts.items() if a.status is AlertStatus.FIRING
        }

    def configure(
        self,
        *,
        rules: Sequence[Rule],
        tree: RoutingTree,
        silences: Sequence[Silence],
        now: datetime,
        inhibit_rules: Sequence[InhibitRule] | None = None,
    ) -> None:
        """Swap in new configuration; alerts of deleted or changed rules resolve.

        `inhibit_rules` replaces the set that mutes notifications; None keeps the current one. Only
        stream-mode rules are evaluated here (prometheus_mode.py evaluates the others).
        """
        rules = tuple(r for r in rules if r.mode is EvaluationMode.STREAM)
        kept = {r.key: r for r in rules}
        gone = [r for r in self.rules if kept.get(r.key) != r]
        self.rules, self.tree, self.silences = tuple(rules), tree, tuple(silences)
        if inhibit_rules is not None:
            self._inhibit = tuple(inhibit_rules)
        self._sample_rules = tuple(r for r in rules if r.kind is not RuleKind.ABSENT)
        # Rules on the per-code XID series read only those; every other rule reads only the GPU's series.
        self._xid_rules = tuple(r for r in self._sample_rules if r.per_xid)
        self._gpu_rules = tuple(r for r in self._sample_rules if not r.per_xid)
        self._by_name = RuleBook(rules)
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
        self._scoped = tuple((r, r.scope()) for r in self._gpu_rules)
        self._xid_scoped = tuple((r, r.scope()) for r in self._xid_rules)
        for key in self._timers.alerting:  # `for` durations may have changed
            self._timers.schedule(key, self.series[key], self._by_name)
        for rule in gone:
            for key, state in list(self.series.items()):
                if rule.name in state.alerts and rule.owns(state.labels):
                    step = retire_rule(state=state, rule=rule, now=now)
                    self._apply_series(key, step.state, step.transitions, now)
            self._retire_node_rule(rule, now)

    def observe(
        self, *, node: str, at: datetime, samples: Sequence[Sample], now: datetime, whole: bool = True
    ) -> int:
        """Evaluate one node's batch taken at `at`; returns how many samples were evaluated.

        A whole batch (the node's every GPU, as the agent sends them) also says which series left it.
        """
        done, present = 0, set[str]()
        for sample in samples:
            key = self._key(sample.labels)
            present.add(key)
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
            rules = self._xid_rules if XID_LABEL in sample.labels else self._gpu_rules
            step = evaluate(state=self._current(key), sample=sample, rules=rules, now=at)
            self._apply_series(key, step.state, step.transitions, now)
            if XID_LABEL not in sample.labels:
                self._gpu_series[sample.labels.get("gpu", "")] = key
        if samples:
            self._observe_node(node, samples[0], at, now)
        if whole:
            self._left(node, present, at, now)
        return done

    def observe_readings(self, *, node: str, at: datetime, readings: Sequence[Reading], now: datetime) -> int:
        """`observe` for decoded wire readings (see samples.py): the hot path.

        A sample that cannot change anything (no alert held, no applicable rule holds, counters
        flat) only records when its series was last seen; nothing is allocated for it.
        """
        plans, series, seen, marks = self._plans, self.series, self._seen, self._watermarks
        done, first, present = 0, None, set[str]()
        if self._xid_rules:  # the per-code XID series after the GPUs' own
            readings = [*readings, *xid_readings(readings)]
        for reading in readings:
            plan = plans.get(identity(node, reading))
            if plan is None:
                plan = self._plan(node, reading)
            if first is None:
                first = plan
            key = plan.key
            present.add(key)
            if marks:
                mark = marks.get(key)
                if mark is not None:
                    if at <= mark:
                        continue  # redelivered: this sample's effects are already persisted
                    del marks[key]
            done += 1
            state = series.get(key)
            quiet = not plan.loud and (state is None or not state.alerts)
            if quiet and quiet_reading(plan, state, reading):
                if state is None:
                    self._start(plan, reading, at)
                else:
                    seen[key] = at  # nothing can change but the time it was last seen
                continue
            sample = to_sample(labels=plan.labels, reading=reading, fields=self._value_fields)
            per_xid = XID_LABEL in plan.labels
            rules = self._xid_rules if per_xid else self._gpu_rules
            step = evaluate(state=self._current(key), sample=sample, rules=rules, now=at)
            self._apply_series(key, step.state, step.transitions, now)
            if not per_xid:
                self._gpu_series[plan.labels.get("gpu", "")] = key
        if first is not None:
            known = self.nodes.get(node)
            if known is not None and not known.alerts and known.labels == first.node_labels:
                self._node_seen[node] = at  # a live node with nothing firing: only its last-seen moves
            else:
                self._observe_node(node, Sample.model_construct(labels=first.labels, values={}), at, now)
        self._left(node, present, at, now)
        return done

    def _left(self, node: str, present: set[str], at: datetime, now: datetime) -> None:
        """Staleness markers: the alert-holding series of the node's last batch that this one lacks."""
        before = self._in_batch.get(node)
        self._in_batch[node] = present
        if not before:
            return
        alerting = self._timers.alerting
        for key in before - present:
            if key in alerting and (state := self._current(key)) is not None:
                step = left_batch(state=state, rules=self.rules, at=at)
                self._apply_series(key, step.state, step.transitions, now)

    def _plan(self, node: str, reading: Reading) -> Plan:
        labels = reading_labels(node, reading)
        scoped = self._xid_scoped if XID_LABEL in labels else self._scoped
        applicable = [r for r, scope in scoped if matches_all(scope, labels)]
        keys = tuple(r.key for r in applicable)
        checks = self._checks.get(keys)
        if checks is None:  # series with the same applicable rules share their checks
            checks = self._checks[keys] = checks_for(applicable)
        plan = Plan(
            key=self._key(labels),
            labels=labels,
            node_labels={k: labels[k] for k in NODE_LABELS if k in labels},
            thresholds=checks[0],
            counters=checks[1],
            loud=checks[2],
        )
        self._plans[identity(node, reading)] = plan
        return plan

    def _start(self, plan: Plan, reading: Reading, at: datetime) -> None:
        """A new series whose first sample holds nothing: what evaluate() would build, built directly."""
        self.series[plan.key] = started(plan, reading, at, self._windows)
        if XID_LABEL not in plan.labels:
            self._gpu_series[plan.labels.get("gpu", "")] = plan.key

    def _quiet(self, key: str, state: SeriesState, sample: Sample) -> bool:
        """True when evaluate() could only move last_seen: no alert held, no rule holds, counters flat."""
        if state.alerts:
            return False
        applicable = self._applicable.get(key)
        if applicable is None:
            rules = self._xid_rules if XID_LABEL in state.labels else self._gpu_rules
            applicable = self._applicable[key] = tuple(
                r for r in rules if matches_all(r.scope(), state.labels)
            )
        return quiet_sample(applicable, state, sample)

    def apply(self, transitions: Sequence[Transition], *, now: datetime) -> None:
        """Route and record transitions decided elsewhere (prometheus mode's evaluations)."""
        if transitions:
            self._emit(transitions, now)

    def signal(self, signal: Signal, *, now: datetime) -> None:
        """Apply an event-raised signal (already deduplicated by the consumer's inbox)."""
        if signal.kind is SignalKind.GPU_LOST:
            key = self._gpu_series.get(signal.labels.get("gpu", ""))
            labels = self.series[key].labels if key in self.series else signal.labels
            sample = Sample(labels=labels, values={GPU_LOST_METRIC: 1.0})
            node = labels.get("node", "")
            self.observe(node=node, at=signal.at, samples=[sample], now=now, whole=False)
            return
        self._raise_event(signal, now)

    def tick(self, *, now: datetime) -> None:
        """Advance `for`, keep_firing_for, staleness, absence and event-alert timers, then flush groups."""
        for key in list(self._timers.alerting):
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
        for key in self._timers.due(now):
            self._tick_series(key, now)
        self.flush(now=now)

    def _tick_series(self, key: str, now: datetime) -> None:
        current = self._current(key)
        assert current is not None
        step = tick(state=current, rules=self.rules, now=now, config=self._config)
        self._apply_series(key, step.state, step.transitions, now)

    def _observe_node(self, node: str, sample: Sample, at: datetime, now: datetime) -> None:
        self._node_seen.pop(node, None)
        known = node in self.nodes
        step = observe_node(state=self.nodes.get(node), sample=sample, rules=self.rules, now=at)
        self._apply_node(node, step.state, step.transitions, now)
        if not known and step.state is not None:
            self._changes.nodes[node] = step.state  # remembered so silence is noticed after a restart

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
