"""Persisted per-alert state and the Prometheus state machine: inactive → pending → firing → resolved."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict

from services.alerting.domain.alerts import Alert, alert_labels, fingerprint
from services.alerting.domain.rules import Rule

__all__ = [
    "AlertState",
    "EvaluationConfig",
    "Phase",
    "Transition",
    "TransitionKind",
    "expire",
    "observe",
    "promote",
    "transition",
]


class Phase(StrEnum):
    """An alert that is stored is pending or firing; inactive and resolved alerts are not stored."""

    PENDING = "pending"
    FIRING = "firing"


class TransitionKind(StrEnum):
    """What changed; only FIRING and RESOLVED are notified."""

    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"
    CANCELLED = "cancelled"  # pending, then the condition stopped before `for` elapsed


class EvaluationConfig(BaseModel):
    """Evaluation knobs; defaults follow Prometheus where it has one."""

    model_config = ConfigDict(frozen=True)

    staleness: timedelta = timedelta(minutes=5)
    silent_expiry: timedelta = timedelta(hours=24)


class AlertState(BaseModel):
    """One rule's alert on one series; everything a restart needs to neither re-page nor forget a timer."""

    model_config = ConfigDict(frozen=True)

    phase: Phase
    active_at: AwareDatetime
    fired_at: AwareDatetime | None = None
    keep_firing_since: AwareDatetime | None = None
    last_seen: AwareDatetime
    value: float | None = None


class Transition(BaseModel):
    """A state change caused by a sample or a tick, with the outward alert it concerns."""

    model_config = ConfigDict(frozen=True)

    kind: TransitionKind
    rule: str
    at: AwareDatetime
    alert: Alert


Step = tuple[AlertState | None, TransitionKind | None]


def promote(rule: Rule, state: AlertState, now: datetime) -> Step:
    """Pending becomes firing once the condition has held for `for` (at exactly `for`, as Prometheus)."""
    if state.phase is Phase.PENDING and now - state.active_at >= rule.for_duration:
        return state.model_copy(update={"phase": Phase.FIRING, "fired_at": now}), TransitionKind.FIRING
    return state, None


def observe(rule: Rule, prev: AlertState | None, *, holds: bool, value: float, now: datetime) -> Step:
    """Apply one evaluation of the rule's condition to its alert."""
    if holds:
        if prev is None:
            fresh = AlertState(phase=Phase.PENDING, active_at=now, last_seen=now, value=value)
            promoted, kind = promote(rule, fresh, now)
            return promoted, kind or TransitionKind.PENDING
        seen = prev.model_copy(update={"last_seen": now, "value": value, "keep_firing_since": None})
        return promote(rule, seen, now)
    if prev is None:
        return None, None
    if prev.phase is Phase.PENDING:
        return None, TransitionKind.CANCELLED
    since = prev.keep_firing_since or now
    if rule.keep_firing_for is not None and now - since < rule.keep_firing_for:
        return prev.model_copy(update={"keep_firing_since": since, "last_seen": now, "value": value}), None
    return None, TransitionKind.RESOLVED


def expire(rule: Rule | None, state: AlertState, *, now: datetime, config: EvaluationConfig) -> Step:
    """Timers with no new sample: removed rule, stale series, keep_firing_for running out, or `for`."""
    ended = TransitionKind.RESOLVED if state.phase is Phase.FIRING else TransitionKind.CANCELLED
    if rule is None or now - state.last_seen >= config.staleness:
        return None, ended
    since, keep = state.keep_firing_since, rule.keep_firing_for
    if since is not None and keep is not None and now - since >= keep:
        return None, TransitionKind.RESOLVED
    return promote(rule, state, now)


def transition(
    kind: TransitionKind, *, rule: Rule, series: Mapping[str, str], state: AlertState, now: datetime
) -> Transition:
    """Build the transition record, with the outward alert (ended now when resolved)."""
    labels = alert_labels(rule, series)
    annotations = {"summary": rule.summary}
    if rule.runbook_url:
        annotations["runbook_url"] = rule.runbook_url
    ends_at = now if kind in (TransitionKind.RESOLVED, TransitionKind.CANCELLED) else None
    alert = Alert(
        fingerprint=fingerprint(labels),
        labels=labels,
        annotations=annotations,
        starts_at=state.fired_at or state.active_at,
        ends_at=ends_at,
        value=state.value,
    )
    return Transition(kind=kind, rule=rule.name, at=now, alert=alert)
