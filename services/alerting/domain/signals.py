"""Alerts raised by events rather than by rules on samples: faults, budget thresholds, escalations.

Each event becomes a `Signal`; the evaluator turns it into an alert that goes through the same
routing, grouping, silences and delivery as rule alerts. Event alerts have no "condition stopped"
moment, so they resolve after a time-to-live, like Alertmanager's resolve_timeout.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict

from services.alerting.domain.rules import Severity

__all__ = ["Signal", "SignalKind", "budget_signal", "escalation_signal", "fault_signal"]

# XID, ECC, PCIe and lost GPUs stop work; thermal/power/oom are a warning until a rule says more.
_CRITICAL_FAULTS = frozenset({"xid", "ecc", "lost", "pcie", "agent_silent"})
#: XIDs that mean the GPU fell off the bus: the lost GPU itself, paged once by the GpuLost rule.
OFF_THE_BUS_XIDS = frozenset({79})


class SignalKind(StrEnum):
    """How the evaluator applies a signal."""

    EVENT = "event"  # an alert of its own, firing now, resolved after the TTL
    GPU_LOST = "gpu_lost"  # sets the GPU's gpu_lost gauge to 1, evaluated by the GpuLost rule


class Signal(BaseModel):
    """One alert-worthy event, as queued for the evaluator."""

    model_config = ConfigDict(frozen=True)

    kind: SignalKind
    name: str
    labels: dict[str, str]
    summary: str = ""
    severity: Severity = Severity.WARNING
    at: AwareDatetime


def fault_signal(
    *, kind: str, node: str, gpu: str | None, xid: int | None, at: AwareDatetime, evidence: dict[str, Any]
) -> Signal:
    """A telemetry fault: a lost GPU feeds the gpu_lost gauge; anything else is a fault alert.

    XID 79 is the same fault as the lost GPU (the driver's word for it), so it feeds the gauge too: one
    GpuLost alert for the fault, which stays firing while the GPU's readings say lost.
    """
    labels = {"node": node, "fault": kind}
    if gpu:
        labels["gpu"] = gpu
    if gpu and (kind == "lost" or (kind == "xid" and xid in OFF_THE_BUS_XIDS)):
        return Signal(kind=SignalKind.GPU_LOST, name="GpuLost", labels=labels, at=at)
    if xid is not None:
        labels["xid"] = str(xid)
    what = f"XID {xid}" if xid is not None else kind
    detail = ", ".join(f"{k}={v}" for k, v in sorted(evidence.items()))[:300]
    return Signal(
        kind=SignalKind.EVENT,
        name="GpuFault" if gpu else "NodeFault",
        labels=labels,
        summary=f"{what} on {gpu or node}" + (f" ({detail})" if detail else ""),
        severity=Severity.CRITICAL if kind in _CRITICAL_FAULTS else Severity.WARNING,
        at=at,
    )


def budget_signal(
    *, tenant: str, project: str, month: str, threshold_pct: int, hard_stop: bool, at: AwareDatetime
) -> Signal:
    """A project's spend crossed a budget threshold."""
    critical = hard_stop or threshold_pct >= 100
    return Signal(
        kind=SignalKind.EVENT,
        name="BudgetThresholdCrossed",
        labels={"tenant": tenant, "project": project, "month": month, "threshold": str(threshold_pct)},
        summary=f"project {project} crossed {threshold_pct}% of its {month} budget"
        + (" (hard stop)" if hard_stop else ""),
        severity=Severity.CRITICAL if critical else Severity.WARNING,
        at=at,
    )


def escalation_signal(*, incident: str, reason: str, at: AwareDatetime) -> Signal:
    """Automatic recovery gave up on an incident: people must act."""
    return Signal(
        kind=SignalKind.EVENT,
        name="IncidentEscalated",
        labels={"incident": incident},
        summary=f"incident {incident} escalated: {reason}"[:500],
        severity=Severity.CRITICAL,
        at=at,
    )
