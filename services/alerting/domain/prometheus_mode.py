"""Prometheus mode: alerting rules evaluated as Prometheus 2.42 evaluates them.

A group evaluates on its `interval` grid (epoch-aligned, as promtool's test clock is): at each grid time
`ts` every rule's expression is queried at `ts` over the in-memory series (5-minute lookback, staleness
markers when a series leaves its node's batch), and its alerts move as Prometheus's
`AlertingRule.Eval` moves them: a new result is `pending` with `active_at = ts`; it fires at the first
evaluation with `ts - active_at >= for`; a firing alert missing from a result stays firing while
`ts - keep_firing_since < keep_firing_for` (`keep_firing_since` set at the first such evaluation); a
pending one missing is dropped; a firing one missing resolves at `ts`. `for` and `keep_firing_for`
are thus counted in evaluations, not samples. An evaluation whose alerts would share a label set is
an error, as in Prometheus: that rule changes nothing at that `ts`.

The other mode, `stream`, is `engine/` (per sample, lower latency): docs/alerting.md lists the
differences.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from services.alerting.domain.alert_lifecycle import Transition, TransitionKind
from services.alerting.domain.alerts import Alert, alert_labels, fingerprint
from services.alerting.domain.promql import STALE_NAN, PromQLError, Query, SeriesStore
from services.alerting.domain.promql.store import Series, to_ms
from services.alerting.domain.promrules import METRIC_PREFIX, expr_for
from services.alerting.domain.rules import GPU_LOST_METRIC, Rule, RuleKey, RuleKind
from services.alerting.domain.samples import Reading, identity, reading_labels

__all__ = [
    "DEFAULT_INTERVAL",
    "AlertState",
    "PromAlert",
    "PrometheusMode",
    "RuleEvaluation",
    "rule_query",
]

#: Prometheus's global evaluation_interval default, for a group without `interval`.
DEFAULT_INTERVAL = timedelta(minutes=1)
#: How long after a grid time the group evaluates: samples stamped at or before it have arrived. A
#: 1,250-node fleet's batches of one second reach the evaluator over a few hundred ms; at 250 ms some
#: missed their grid time (bench/alerting_eval.py: p99 2.4 s beyond `for`, against 1.8 s at 1 s).
SETTLE = timedelta(seconds=1)
#: Extra history kept beyond what the longest expression reads, and how often it is trimmed.
_MARGIN_S = 60.0
_TRIM_EVERY_S = 30.0
Identity = tuple[str, str, str, str | None, str | None, str | None]  # samples.identity()


class AlertState(StrEnum):
    """Prometheus's alert states."""

    PENDING = "pending"
    FIRING = "firing"
    INACTIVE = "inactive"


@dataclass(slots=True)
class PromAlert:
    """One alert of a rule, as Prometheus keeps it in `AlertingRule.active`."""

    labels: dict[str, str]
    value: float
    state: AlertState
    active_at: float
    fired_at: float | None = None
    resolved_at: float | None = None
    keep_firing_since: float | None = None


def rule_query(rule: Rule) -> Query:
    """The rule's expression: its own PromQL, or the PromQL of its stream shape."""
    return Query.parse(rule.expr if rule.kind is RuleKind.PROMQL and rule.expr else expr_for(rule))


def _at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


@dataclass
class RuleEvaluation:
    """One rule's alerts across evaluations (Prometheus's AlertingRule)."""

    rule: Rule
    query: Query
    active: dict[str, PromAlert] = field(default_factory=dict)
    last_error: str | None = None

    def evaluate(self, store: SeriesStore, ts: float) -> list[tuple[TransitionKind, PromAlert]]:
        """Evaluate at `ts`; the alerts that changed state, with how."""
        try:
            result = self.query.instant(store, ts)
        except PromQLError as error:
            self.last_error = str(error)
            return []
        found: dict[str, tuple[dict[str, str], float]] = {}
        for sample_labels, value in result:
            series = {k: v for k, v in sample_labels.items() if k != "__name__"}
            labels = alert_labels(self.rule, series)
            fp = fingerprint(labels)
            if fp in found:
                self.last_error = "vector contains metrics with the same labelset after applying alert labels"
                return []
            found[fp] = (labels, value)
        self.last_error = None
        changes: list[tuple[TransitionKind, PromAlert]] = []
        for fp, (labels, value) in found.items():
            alert = self.active.get(fp)
            if alert is not None and alert.state is not AlertState.INACTIVE:
                alert.value = value
                continue
            alert = PromAlert(labels=labels, value=value, state=AlertState.PENDING, active_at=ts)
            self.active[fp] = alert
        hold = self.hold()
        keep = (self.rule.keep_firing_for or timedelta(0)).total_seconds()
        for fp, alert in list(self.active.items()):
            if fp not in found:
                keep_firing = False
                if alert.state is AlertState.FIRING and keep > 0:
                    if alert.keep_firing_since is None:
                        alert.keep_firing_since = ts
                    keep_firing = ts - alert.keep_firing_since < keep
                if alert.state is AlertState.PENDING or (
                    alert.resolved_at is not None and ts - alert.resolved_at > _RESOLVED_RETENTION_S
                ):
                    del self.active[fp]
                    if alert.state is AlertState.PENDING:
                        changes.append((TransitionKind.CANCELLED, alert))
                        continue
                if alert.state is not AlertState.INACTIVE and not keep_firing:
                    alert.state, alert.resolved_at = AlertState.INACTIVE, ts
                    changes.append((TransitionKind.RESOLVED, alert))
                if not keep_firing:
                    continue
            else:
                alert.keep_firing_since = None
            if alert.state is AlertState.PENDING:
                if ts - alert.active_at >= hold:
                    alert.state, alert.fired_at = AlertState.FIRING, ts
                    changes.append((TransitionKind.FIRING, alert))
                elif alert.active_at == ts:
                    changes.append((TransitionKind.PENDING, alert))
        return changes

    def alerts_series(self) -> list[tuple[dict[str, str], float]]:
        """The ALERTS and ALERTS_FOR_STATE samples this rule writes at its last evaluation."""
        out: list[tuple[dict[str, str], float]] = []
        for alert in self.active.values():
            if alert.state is AlertState.INACTIVE:
                continue
            out.append(({"__name__": "ALERTS", **alert.labels, "alertstate": alert.state.value}, 1.0))
            out.append(({"__name__": "ALERTS_FOR_STATE", **alert.labels}, float(int(alert.active_at))))
        return out

    def transition(self, kind: TransitionKind, alert: PromAlert, ts: float) -> Transition:
        """The outward record of a change, as the stream engine builds it (annotations expand later)."""
        started = alert.fired_at if alert.fired_at is not None else alert.active_at
        ended = ts if kind in (TransitionKind.RESOLVED, TransitionKind.CANCELLED) else None
        outward = Alert(
            fingerprint=fingerprint(alert.labels),
            labels=alert.labels,
            annotations=self.rule.all_annotations(),
            starts_at=_at(started),
            ends_at=None if ended is None else _at(max(ended, started)),
            value=alert.value if math.isfinite(alert.value) else None,
        )
        fires_at = _at(alert.active_at + self.hold()) if kind is TransitionKind.PENDING else None
        return Transition(kind=kind, rule=self.rule.name, at=_at(ts), alert=outward, fires_at=fires_at)

    def hold(self) -> float:
        """Seconds a result must hold before its alert fires (an absence rule's silence is in its
        expression, exported with `for: 0s`, not a hold)."""
        return 0.0 if self.rule.kind is RuleKind.ABSENT else self.rule.for_duration.total_seconds()


#: Prometheus keeps a resolved alert this long to re-send its resolution.
_RESOLVED_RETENTION_S = 15 * 60.0


@dataclass
class _Group:
    key: tuple[str | None, str, float]  # owner, name, interval seconds
    interval: float
    rules: list[RuleEvaluation]
    last_ts: float | None = None


class PrometheusMode:
    """Every prometheus-mode group over one series store per owner (a tenant's rules see only its series)."""

    def __init__(self, *, interval: timedelta = DEFAULT_INTERVAL, settle: timedelta = SETTLE) -> None:
        self._default = interval.total_seconds()
        self._settle = settle.total_seconds()
        self._groups: list[_Group] = []
        self._stores: dict[str | None, SeriesStore] = {None: SeriesStore()}
        self._fields: frozenset[str] = frozenset()
        self._horizon = 0.0
        self._last_batch: dict[str, set[tuple[Identity, str]]] = {}
        self._feeds: dict[Identity, list[tuple[str, tuple[Series, ...]]]] = {}
        self._trimmed = 0.0
        self._told: dict[RuleKey, str | None] = {}
        self._dropped: list[tuple[RuleEvaluation, PromAlert]] = []
        self.rules: tuple[Rule, ...] = ()

    @property
    def fields(self) -> frozenset[str]:
        """The sample fields the loaded expressions read (only these are kept)."""
        return self._fields

    def configure(self, rules: Sequence[Rule]) -> None:
        """Load the prometheus-mode rules; an unchanged rule keeps its alerts (Prometheus does too), a
        replaced or deleted one's pending alerts are cancelled by the next `evaluate`."""
        kept = {(e.rule.key, e.rule): e for g in self._groups for e in g.rules}
        groups: dict[tuple[str | None, str, float], _Group] = {}
        fields: set[str] = set()
        horizon = 0.0
        for rule in rules:
            evaluation = kept.get((rule.key, rule)) or RuleEvaluation(rule=rule, query=rule_query(rule))
            interval = rule.interval.total_seconds() if rule.interval else self._default
            key = (rule.owner_tenant, rule.group, interval)
            group = groups.setdefault(key, _Group(key=key, interval=interval, rules=[]))
            group.rules.append(evaluation)
            fields |= {n.removeprefix(METRIC_PREFIX) for n in evaluation.query.metric_names}
            horizon = max(horizon, evaluation.query.horizon)
        chosen = {id(e) for g in groups.values() for e in g.rules}
        for old in kept.values():  # a replaced or deleted rule's pending alerts end (evaluate says so)
            if id(old) not in chosen:
                pending = [a for a in old.active.values() if a.state is AlertState.PENDING]
                self._dropped.extend((old, alert) for alert in pending)
        previous = {g.key: g.last_ts for g in self._groups}
        for group in groups.values():
            group.last_ts = previous.get(group.key)
        self._groups, self.rules = list(groups.values()), tuple(rules)
        self._fields, self._horizon = frozenset(fields), horizon
        owners = {r.owner_tenant for r in rules} | {None}
        self._stores = {o: self._stores.get(o) or SeriesStore() for o in owners}
        self._feeds.clear()  # fields or stores may have changed

    def restore(self, firing: Iterable[Alert]) -> None:
        """Take back the firing alerts of these rules (from the persisted groups), so that they resolve
        when their condition is gone; pending alerts start over (their `for` counts from the next result)."""
        by_name: dict[RuleKey, RuleEvaluation] = {e.rule.key: e for g in self._groups for e in g.rules}
        for alert in firing:
            name = alert.labels.get("alertname", "")
            evaluation = by_name.get((alert.labels.get("tenant"), name)) or by_name.get((None, name))
            if evaluation is None or fingerprint(alert.labels) != alert.fingerprint:
                continue
            at = alert.starts_at.timestamp()
            evaluation.active[alert.fingerprint] = PromAlert(
                labels=dict(alert.labels),
                value=alert.value if alert.value is not None else math.nan,
                state=AlertState.FIRING,
                active_at=at,
                fired_at=at,
            )

    def observe_readings(self, *, node: str, at: datetime, readings: Sequence[Reading]) -> None:
        """One node's batch: each read field a sample at `at`; a series of its last batch missing now
        gets a staleness marker at `at` (Prometheus does so for a series gone from a scrape).

        The hot path at 10,000 GPUs a second: each reading's identity keeps the series its fields
        feed (the global store's, and its tenant's when that tenant has rules), so a sample is one
        append; the handles are dropped when a trim removes a series or the configuration changes."""
        if not self._groups:
            return
        t_ms = to_ms(at.timestamp())
        feeds = self._feeds
        present: set[tuple[Identity, str]] = set()
        for reading in readings:
            ident = identity(node, reading)
            fed = feeds.get(ident)
            if fed is None:
                fed = feeds[ident] = self._feed(node, reading)
            lost = 1.0 if reading.get("lost_reason") else 0.0
            for name, handles in fed:
                value = lost if name == GPU_LOST_METRIC else reading.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    present.add((ident, name))
                    for series in handles:
                        series.add(t_ms, float(value))
        last = self._last_batch.get(node)
        if last:
            for ident, name in last - present:
                for fed_name, handles in feeds.get(ident, ()):
                    if fed_name == name:
                        for series in handles:
                            series.add(t_ms, STALE_NAN)
        self._last_batch[node] = present

    def _feed(self, node: str, reading: Reading) -> list[tuple[str, tuple[Series, ...]]]:
        """The series `gpucloud_<field>` a reading's fields feed, with the stream mode's labels
        (`gpu_lost` is 1 for a reading the agent marks lost, else 0; the per-code XID series are
        stream mode's only)."""
        labels = reading_labels(node, reading)
        tenant = self._stores.get(labels["tenant"]) if "tenant" in labels else None
        stores = (self._stores[None],) if tenant is None else (self._stores[None], tenant)
        return [
            (name, tuple(store.series({"__name__": METRIC_PREFIX + name, **labels}) for store in stores))
            for name in sorted(self._fields)
        ]

    def evaluate(self, now: datetime) -> list[Transition]:
        """Evaluate every group whose next grid time has settled; missed grid times are skipped (the
        latest is evaluated), as Prometheus skips missed iterations. The pending alerts of rules that
        `configure` replaced or deleted come first, cancelled at `now`."""
        clock = now.timestamp() - self._settle
        dropped, self._dropped = self._dropped, []
        transitions = [e.transition(TransitionKind.CANCELLED, a, now.timestamp()) for e, a in dropped]
        for group in self._groups:
            ts = math.floor(clock / group.interval) * group.interval
            if group.last_ts is not None and ts <= group.last_ts:
                continue
            group.last_ts = ts
            store = self._stores[group.key[0]]
            for evaluation in group.rules:
                for kind, alert in evaluation.evaluate(store, ts):
                    transitions.append(evaluation.transition(kind, alert, ts))
        if self._groups and clock - self._trimmed >= _TRIM_EVERY_S:
            self._trimmed = clock
            before = clock - self._horizon - _MARGIN_S
            if sum(store.trim(before) for store in self._stores.values()):
                self._feeds.clear()  # a dropped series' handle must not be fed
        return transitions

    def new_errors(self) -> list[tuple[str, str]]:
        """(rule name, error) of each rule whose evaluation error changed since the last call: what the
        service logs (an erroring rule changes nothing, as in Prometheus)."""
        changed: list[tuple[str, str]] = []
        for evaluation in self.evaluations():
            key = evaluation.rule.key
            if evaluation.last_error != self._told.get(key):
                self._told[key] = evaluation.last_error
                if evaluation.last_error is not None:
                    changed.append((evaluation.rule.name, evaluation.last_error))
        return changed

    def evaluations(self) -> list[RuleEvaluation]:
        """Every rule's evaluation state (for the API and tests)."""
        return [e for g in self._groups for e in g.rules]
