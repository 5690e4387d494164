"""Persisted per-alert state and the Prometheus state machine: inactive → pending → firing → resolved."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    "gone",
    "observe",
    "pending_writes",
    "promote",
    "promote_wait",
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
    #: How long past a `for` or keep_firing_for deadline the series' next sample is waited for before a
    #: tick decides on its last one: a flowing series is decided by its samples' own times (a sample
    #: below the threshold at the deadline, delayed in the pipeline, cancels rather than pages).
    sample_grace: timedelta = timedelta(seconds=2)
    #: The same wait for a pending alert's `for` deadline, short because paging late is the cost: a
    #: sample stamped at or before the deadline that arrives within it still cancels; after it, the
    #: last sample stands and the alert fires, dated at its deadline (Prometheus too decides on what
    #: it has ingested when it evaluates).
    promote_grace: timedelta = timedelta(milliseconds=100)


class AlertState(BaseModel):
    """One rule's alert on one series; everything a restart needs to neither re-page nor forget a timer."""

    model_config = ConfigDict(frozen=True)

    phase: Phase
    active_at: AwareDatetime
    fired_at: AwareDatetime | None = None
    keep_firing_since: AwareDatetime | None = None
    last_seen: AwareDatetime
    value: float | None = None
    #: Seconds between its last two samples: the series' cadence, to tell whether a sample stamped at
    #: or before the `for` deadline may still come (see `promote_wait`).
    gap_s: float | None = None


def promote_wait(state: AlertState, due: datetime, grace: timedelta) -> timedelta:
    """How long past `due` a pending alert waits for its series' next sample before its last stands.

    Only a sample stamped at or before `due` can cancel it. When the last sample is within half the
    series' cadence of `due`, the next one is stamped after `due`: nothing can cancel, so no wait.
    Otherwise (the next sample is due about at the deadline) it waits `grace` for it."""
    if state.gap_s is not None and (due - state.last_seen).total_seconds() < state.gap_s / 2:
        return timedelta(0)
    return grace


class Transition(BaseModel):
    """A state change caused by a sample or a tick, with the outward alert it concerns."""

    model_config = ConfigDict(frozen=True)

    kind: TransitionKind
    rule: str
    at: AwareDatetime
    alert: Alert
    #: When a pending alert's `for` elapses (PENDING transitions only): what the API's countdown shows.
    fires_at: AwareDatetime | None = None


Step = tuple[AlertState | None, TransitionKind | None]


def pending_writes(transitions: Iterable[Transition]) -> tuple[list[Transition], list[str]]:
    """What transitions do to the listed pending alerts, folded in order (the last per alert wins): the
    PENDING transitions to write, and the fingerprints to forget (fired, cancelled or resolved)."""
    last: dict[str, Transition | None] = {}
    for change in transitions:
        last[change.alert.fingerprint] = change if change.kind is TransitionKind.PENDING else None
    return [c for c in last.values() if c is not None], [fp for fp, c in last.items() if c is None]


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
        gap = (now - prev.last_seen).total_seconds()
        update = {
            "last_seen": now,
            "value": value,
            "keep_firing_since": None,
            "gap_s": gap if gap > 0 else None,
        }
        return promote(rule, prev.model_copy(update=update), now)
    if prev is None:
        return None, None
    if prev.phase is Phase.PENDING:
        return None, TransitionKind.CANCELLED
    since = prev.keep_firing_since or now
    if rule.keep_firing_for is not None and now - since < rule.keep_firing_for:
        return prev.model_copy(update={"keep_firing_since": since, "last_seen": now, "value": value}), None
    return None, TransitionKind.RESOLVED


def expire(rule: Rule | None, state: AlertState, *, now: datetime, config: EvaluationConfig) -> Step:
    """Timers with no new sample (``now`` is the wall clock, the alert's times are its samples').

    A deadline (`for`, keep_firing_for) is decided by the wall clock only once the series has sent
    nothing past it for ``promote_grace`` (`for`) or ``sample_grace`` (the hold); then the last
    sample stands, as Prometheus's lookback has it. A series silent for ``staleness`` ends its alert,
    after its keep_firing_for hold if it has one.
    """
    if rule is None:
        ended = TransitionKind.RESOLVED if state.phase is Phase.FIRING else TransitionKind.CANCELLED
        return None, ended
    grace, keep, stale_at = config.sample_grace, rule.keep_firing_for, state.last_seen + config.staleness
    if state.phase is Phase.PENDING:
        if now >= stale_at:
            return None, TransitionKind.CANCELLED
        due = state.active_at + rule.for_duration
        # Silent since it last held (and no sample stamped by `due` can still come): it holds at `due`.
        if state.last_seen < due <= now - promote_wait(state, due, config.promote_grace):
            return state.model_copy(update={"phase": Phase.FIRING, "fired_at": due}), TransitionKind.FIRING
        return state, None
    since = state.keep_firing_since
    if since is not None and keep is not None:  # in its hold since the condition stopped
        end = min(since + keep, stale_at + keep)
        if state.last_seen < end <= now - grace:
            return None, TransitionKind.RESOLVED
        return state, None
    if now < stale_at:
        return state, None
    if keep is None or now >= stale_at + keep:
        return None, TransitionKind.RESOLVED
    return state.model_copy(update={"keep_firing_since": stale_at}), None  # silent: its hold begins


def gone(rule: Rule, state: AlertState, *, at: datetime) -> Step:
    """The series left its source's batch at ``at`` (a staleness marker): its condition no longer holds.

    A pending alert is cancelled; a firing one resolves, or starts its keep_firing_for hold.
    """
    if state.phase is Phase.PENDING:
        return None, TransitionKind.CANCELLED
    if rule.keep_firing_for is None:
        return None, TransitionKind.RESOLVED
    if state.keep_firing_since is not None:
        return state, None
    return state.model_copy(update={"keep_firing_since": at, "last_seen": max(state.last_seen, at)}), None


def transition(
    kind: TransitionKind, *, rule: Rule, series: Mapping[str, str], state: AlertState, now: datetime
) -> Transition:
    """Build the transition record, with the outward alert (ended now when resolved)."""
    labels = alert_labels(rule, series)
    annotations = rule.all_annotations()
    starts_at = state.fired_at or state.active_at
    # Never before it started: a tick's clock may trail the agent's stamps (skew, a restored state).
    ends_at = max(now, starts_at) if kind in (TransitionKind.RESOLVED, TransitionKind.CANCELLED) else None
    alert = Alert(
        fingerprint=fingerprint(labels),
        labels=labels,
        annotations=annotations,
        starts_at=starts_at,
        ends_at=ends_at,
        value=state.value,
    )
    fires_at = state.active_at + rule.for_duration if kind is TransitionKind.PENDING else None
    return Transition(kind=kind, rule=rule.name, at=now, alert=alert, fires_at=fires_at)
