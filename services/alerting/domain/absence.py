"""The "agent silent" rules: fire when a node sends no sample at all for the rule's `for`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict

from services.alerting.domain.alert_lifecycle import (
    AlertState,
    EvaluationConfig,
    Phase,
    Transition,
    TransitionKind,
    transition,
)
from services.alerting.domain.matchers import matches_all
from services.alerting.domain.rules import Rule, RuleKind
from services.alerting.domain.series_evaluation import Sample

__all__ = ["NODE_LABELS", "NodeState", "NodeStep", "observe_node", "tick_node"]

# Labels that describe a node rather than one GPU on it.
NODE_LABELS = ("node", "pool")


class NodeState(BaseModel):
    """When a node was last heard from, and its firing absence alerts (by rule)."""

    model_config = ConfigDict(frozen=True)

    labels: dict[str, str]
    last_seen: AwareDatetime
    alerts: dict[str, AlertState] = {}


class NodeStep(BaseModel):
    """New node state (None = forget the node) and what changed."""

    model_config = ConfigDict(frozen=True)

    state: NodeState | None
    transitions: tuple[Transition, ...] = ()


def observe_node(
    *, state: NodeState | None, sample: Sample, rules: Sequence[Rule], now: datetime
) -> NodeStep:
    """Any sample from the node proves the agent alive: resolve its silence alerts."""
    labels = {k: sample.labels[k] for k in NODE_LABELS if k in sample.labels}
    changes = _end_all(state, rules, now) if state else ()
    return NodeStep(state=NodeState(labels=labels, last_seen=now), transitions=changes)


def tick_node(
    *, state: NodeState, rules: Sequence[Rule], now: datetime, config: EvaluationConfig
) -> NodeStep:
    """Fire absence rules once silence reaches `for`; give up on a node silent past `silent_expiry`."""
    silent = now - state.last_seen
    if silent >= config.silent_expiry:
        return NodeStep(state=None, transitions=_end_all(state, rules, now))
    alerts = dict(state.alerts)
    changes = []
    for rule in _absence_rules(rules, state):
        if rule.name not in alerts and silent >= rule.for_duration:
            # Active since the last sample: that is when the node fell silent.
            alerts[rule.name] = AlertState(
                phase=Phase.FIRING, active_at=state.last_seen, fired_at=now, last_seen=state.last_seen
            )
            changes.append(
                transition(
                    TransitionKind.FIRING, rule=rule, series=state.labels, state=alerts[rule.name], now=now
                )
            )
    return NodeStep(state=state.model_copy(update={"alerts": alerts}), transitions=tuple(changes))


def _absence_rules(rules: Sequence[Rule], state: NodeState) -> list[Rule]:
    return [r for r in rules if r.kind is RuleKind.ABSENT and matches_all(r.scope(), state.labels)]


def _end_all(state: NodeState, rules: Sequence[Rule], now: datetime) -> tuple[Transition, ...]:
    by_name = {r.name: r for r in rules}
    return tuple(
        transition(TransitionKind.RESOLVED, rule=by_name[name], series=state.labels, state=alert, now=now)
        for name, alert in state.alerts.items()
        if name in by_name
    )
