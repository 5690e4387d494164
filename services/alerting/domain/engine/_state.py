"""The engine's bookkeeping: its in-memory state, and the changes and notifications that state makes.

Every input the engine takes (samples, signals, ticks, configuration) ends in `_apply_series`,
`_apply_node` or `_emit`, which record what to persist and feed firing and resolved alerts into groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from services.alerting.domain.absence import NodeState
from services.alerting.domain.alert_lifecycle import (
    EvaluationConfig,
    Phase,
    Transition,
    TransitionKind,
    transition,
)
from services.alerting.domain.alerts import Alert
from services.alerting.domain.engine._changes import Changes, EventAlert
from services.alerting.domain.engine._plan import Checks, Plan
from services.alerting.domain.engine._timers import PendingTimers
from services.alerting.domain.grouping import Groups, due_notifications, ingest
from services.alerting.domain.inhibition import DEFAULT_INHIBIT_RULES, InhibitRule, muter
from services.alerting.domain.matchers import Matcher
from services.alerting.domain.routing import RoutingTree
from services.alerting.domain.rules import Rule, RuleBook, RuleKey
from services.alerting.domain.series_evaluation import SeriesState, series_key
from services.alerting.domain.silences import Silence

__all__ = ["EngineState"]

_NOTIFIED = (TransitionKind.FIRING, TransitionKind.RESOLVED)


class EngineState:
    """The state of every series, node, event alert and group, and the changes not yet drained."""

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
        self._xid_rules: tuple[Rule, ...] = ()
        self._gpu_rules: tuple[Rule, ...] = ()
        self._by_name = RuleBook()
        self._windows: dict[str, float] = {}
        self._value_fields: tuple[str, ...] = ()
        self._absent_for: timedelta | None = None
        self._plans: dict[tuple[str, str, str, str | None, str | None, str | None], Plan] = {}
        self._scoped: tuple[tuple[Rule, tuple[Matcher, ...]], ...] = ()
        self._xid_scoped: tuple[tuple[Rule, tuple[Matcher, ...]], ...] = ()
        self._checks: dict[tuple[RuleKey, ...], Checks] = {}
        self._node_seen: dict[str, datetime] = {}
        self._in_batch: dict[str, set[str]] = {}  # node -> the series of its last batch (staleness markers)
        # Series holding an alert (what tick() must look at), and when pending alerts come due.
        self._timers = PendingTimers(grace=config.promote_grace)
        self.metrics: frozenset[str] = frozenset()
        self._changes = Changes()

    def _key(self, labels: Mapping[str, str]) -> str:
        # Labels arrive in a fixed order per series, so their items identify it without hashing JSON.
        items = tuple(labels.items())
        key = self._keys.get(items)
        if key is None:
            key = self._keys[items] = series_key(labels)
        return key

    def _current(self, key: str) -> SeriesState | None:
        state, seen = self.series.get(key), self._seen.pop(key, None)
        if state is not None and seen is not None and seen > state.last_seen:
            state = self.series[key] = state.model_copy(update={"last_seen": seen})
        return state

    def _node(self, name: str) -> NodeState:
        """The node's state with the last-seen instant the hot path kept aside folded in."""
        state, seen = self.nodes[name], self._node_seen.pop(name, None)
        if seen is not None:
            state = self.nodes[name] = state.model_copy(update={"last_seen": seen})
        return state

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

    def pending(self, *, now: datetime) -> list[Transition]:
        """Every pending alert of the series, as its PENDING transition under the current rules: what an
        evaluator taking over records again (the alerts restored with the series keep their timers)."""
        held: list[Transition] = []
        for state in self.series.values():
            for name, alert in state.alerts.items():
                rule = self._by_name.get(name, state.labels)
                if alert.phase is Phase.PENDING and rule is not None:
                    pending = transition(
                        TransitionKind.PENDING, rule=rule, series=state.labels, state=alert, now=now
                    )
                    held.append(pending)
        return held

    def _apply_series(
        self, key: str, state: SeriesState | None, transitions: Iterable[Transition], now: datetime
    ) -> None:
        if state is None:
            self.series.pop(key, None)
            self._seen.pop(key, None)
            self._applicable.pop(key, None)
        else:
            self.series[key] = state
        self._timers.track(key, state, self._by_name)
        changed = list(transitions)
        if changed:
            # Only an alert-holding series is worth a row; the rest restarts from the next sample.
            self._changes.series[key] = state if state is not None and state.alerts else None
            self._emit(changed, now)

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
