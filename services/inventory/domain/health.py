"""GPU health and node status: the allowed transitions, each recorded with reason and time.

Draining and failed GPUs (and GPUs on draining or down nodes) offer no capacity. Repeating an
action whose target is the current state (a second `drain`, a repeated fault signal) records
nothing: the sources are at-least-once and noisy, and a no-op is not an error.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from services.inventory.domain.errors import ForbiddenTransitionError

__all__ = [
    "GpuHealth",
    "HealthAction",
    "HealthRecord",
    "NodeStatus",
    "StatusRecord",
    "gpu_offers_capacity",
    "node_offers_capacity",
    "transition_gpu",
    "transition_node",
]


class GpuHealth(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    DRAINING = "draining"
    FAILED = "failed"


class NodeStatus(StrEnum):
    READY = "ready"
    DRAINING = "draining"
    DOWN = "down"


class HealthAction(StrEnum):
    DRAIN = "drain"
    UNDRAIN = "undrain"
    FAIL = "fail"
    RECOVER = "recover"
    DEGRADE = "degrade"


_H = GpuHealth
# action -> (states it may start from, state it leads to)
_GPU_RULES: dict[HealthAction, tuple[frozenset[GpuHealth], GpuHealth]] = {
    HealthAction.DEGRADE: (frozenset({_H.HEALTHY}), _H.DEGRADED),
    HealthAction.DRAIN: (frozenset({_H.HEALTHY, _H.DEGRADED}), _H.DRAINING),
    HealthAction.UNDRAIN: (frozenset({_H.DRAINING}), _H.HEALTHY),
    HealthAction.FAIL: (frozenset({_H.HEALTHY, _H.DEGRADED, _H.DRAINING}), _H.FAILED),
    HealthAction.RECOVER: (frozenset({_H.DEGRADED, _H.FAILED}), _H.HEALTHY),
}
_N = NodeStatus
_NODE_RULES: dict[HealthAction, tuple[frozenset[NodeStatus], NodeStatus]] = {
    HealthAction.DRAIN: (frozenset({_N.READY}), _N.DRAINING),
    HealthAction.UNDRAIN: (frozenset({_N.DRAINING}), _N.READY),
    HealthAction.FAIL: (frozenset({_N.READY, _N.DRAINING}), _N.DOWN),
    HealthAction.RECOVER: (frozenset({_N.DOWN}), _N.READY),
}


class HealthRecord(BaseModel):
    """One recorded GPU health change."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: HealthAction
    from_state: GpuHealth
    to_state: GpuHealth
    reason: str = Field(min_length=1)
    at: datetime


class StatusRecord(BaseModel):
    """One recorded node status change."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: HealthAction
    from_state: NodeStatus
    to_state: NodeStatus
    reason: str = Field(min_length=1)
    at: datetime


_S = TypeVar("_S", GpuHealth, NodeStatus)


def _target(rules: dict[HealthAction, tuple[frozenset[_S], _S]], current: _S, action: HealthAction) -> _S:
    if action not in rules:
        raise ForbiddenTransitionError(f"action {action.value} does not apply here")
    sources, target = rules[action]
    if current != target and current not in sources:
        allowed = ", ".join(sorted(s.value for s in sources))
        raise ForbiddenTransitionError(
            f"cannot {action.value} from {current.value}: {action.value} applies only from {allowed}"
        )
    return target


def transition_gpu(
    *, current: GpuHealth, action: HealthAction, reason: str, at: datetime
) -> tuple[GpuHealth, HealthRecord | None]:
    """Apply `action` to a GPU in `current`; return the new state and its record (None when a no-op)."""
    target = _target(_GPU_RULES, current, action)
    if target == current:
        return current, None
    return target, HealthRecord(action=action, from_state=current, to_state=target, reason=reason, at=at)


def transition_node(
    *, current: NodeStatus, action: HealthAction, reason: str, at: datetime
) -> tuple[NodeStatus, StatusRecord | None]:
    """Apply `action` to a node in `current`; return the new status and its record (None when a no-op)."""
    target = _target(_NODE_RULES, current, action)
    if target == current:
        return current, None
    return target, StatusRecord(action=action, from_state=current, to_state=target, reason=reason, at=at)


def gpu_offers_capacity(health: GpuHealth) -> bool:
    """Healthy and degraded GPUs take new work; draining and failed ones do not."""
    return health in {GpuHealth.HEALTHY, GpuHealth.DEGRADED}


def node_offers_capacity(status: NodeStatus) -> bool:
    """Only ready nodes take new work."""
    return status is NodeStatus.READY
