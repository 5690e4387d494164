"""Idle reclaim: warn about instances idle for a long time, then ask to release them after a grace period.

Decisions rest on evidence: idleness is measured over the rollups actually seen, so a telemetry gap
longer than `max_gap` restarts the idle clock rather than counting as idle time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

__all__ = [
    "IdleAction",
    "IdleActionRecord",
    "IdleDecision",
    "IdlePolicy",
    "IdleState",
    "UtilisationRollup",
    "evaluate_idle",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class IdlePolicy:
    """When an instance counts as idle, and how long before warning and releasing it."""

    threshold_pct: float = 5.0
    idle_after: timedelta = timedelta(hours=72)
    grace: timedelta = timedelta(hours=24)
    max_gap: timedelta = timedelta(minutes=5)


@dataclass(frozen=True, slots=True, kw_only=True)
class UtilisationRollup:
    """One rollup window for an instance: the busiest of its GPUs' utilisation over [start, end)."""

    start: datetime
    end: datetime
    max_gpu_util_pct: float


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleState:
    """What the idle detector remembers about one instance between evaluations."""

    idle_since: datetime | None = None
    observed_until: datetime | None = None
    warned_at: datetime | None = None
    release_requested_at: datetime | None = None


class IdleAction(StrEnum):
    """What billing asks for: a warning to the tenant, or a release request to the scheduler."""

    WARN = "warn"
    RELEASE = "release"


@dataclass(frozen=True, slots=True)
class IdleActionRecord:
    """One warning or release request as kept (once per workload, stage and time)."""

    workload_id: str
    tenant_id: str
    stage: str
    idle_hours: float
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleDecision:
    """The new state and the actions to emit (each at most once per idle stretch)."""

    state: IdleState
    actions: tuple[IdleAction, ...]


def evaluate_idle(
    *, state: IdleState, rollups: Iterable[UtilisationRollup], policy: IdlePolicy, now: datetime
) -> IdleDecision:
    """Fold new rollups into the state, then warn after `idle_after` and release after a further `grace`."""
    for rollup in sorted(rollups, key=lambda r: r.start):
        state = _observe(state, rollup, policy)
    if state.idle_since is None or state.observed_until is None:
        return IdleDecision(state=state, actions=())
    idle_for = state.observed_until - state.idle_since
    if state.warned_at is None and idle_for >= policy.idle_after:
        return IdleDecision(state=replace(state, warned_at=now), actions=(IdleAction.WARN,))
    if _release_due(state, idle_for=idle_for, policy=policy, now=now):
        return IdleDecision(state=replace(state, release_requested_at=now), actions=(IdleAction.RELEASE,))
    return IdleDecision(state=state, actions=())


def _observe(state: IdleState, rollup: UtilisationRollup, policy: IdlePolicy) -> IdleState:
    if state.observed_until is not None and rollup.start < state.observed_until:
        return state  # already folded in: redelivered rollups change nothing
    if rollup.max_gpu_util_pct >= policy.threshold_pct:
        return IdleState(observed_until=rollup.end)  # any activity resets warning and release
    gap = state.observed_until is not None and rollup.start - state.observed_until > policy.max_gap
    if state.idle_since is None or gap:
        return IdleState(idle_since=rollup.start, observed_until=rollup.end)
    return replace(state, observed_until=rollup.end)


def _release_due(state: IdleState, *, idle_for: timedelta, policy: IdlePolicy, now: datetime) -> bool:
    # The tenant gets the full grace after the warning *and* the instance stays idle through it.
    return (
        state.warned_at is not None
        and state.release_requested_at is None
        and now - state.warned_at >= policy.grace
        and idle_for >= policy.idle_after + policy.grace
    )
