"""Translation of other services' events into the core's inputs: fault signals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from libs.common.events.alerting import AlertFiredV1
from libs.common.events.telemetry import FaultSignaledV1
from services.recovery.domain.classify import EvidenceValue, FaultKind, FaultSignal

__all__ = ["ALERT_KINDS", "from_alert", "from_fault"]

# Alerts that are faults in their own right; other alerts are symptoms telemetry already signals.
ALERT_KINDS: Mapping[str, FaultKind] = {
    "NodeAgentSilent": FaultKind.AGENT_SILENT,
    "GpuLost": FaultKind.LOST,
}


def _evidence(raw: Mapping[str, Any]) -> dict[str, EvidenceValue]:
    """Scalar readings kept as they are; anything nested is kept as its text."""
    return {k: v if isinstance(v, str | int | float | bool) else str(v) for k, v in raw.items()}


def from_fault(event: FaultSignaledV1) -> FaultSignal:
    """A telemetry fault signal as the core sees it."""
    return FaultSignal(
        kind=FaultKind(event.kind),
        xid=event.xid if event.kind == "xid" else None,
        gpu=event.gpu_uuid,
        node=event.node,
        at=event.at,
        evidence=_evidence(event.evidence),
    )


def from_alert(event: AlertFiredV1) -> FaultSignal | None:
    """A fault signal for alerts that are faults (agent silent, GPU lost); None for other alerts."""
    kind = ALERT_KINDS.get(event.rule)
    node = event.labels.get("node") or event.labels.get("hostname")
    if kind is None or not node:
        return None
    gpu = event.labels.get("gpu") or event.labels.get("gpu_uuid")
    evidence = _evidence({"alert": event.rule, "fingerprint": event.fingerprint, "summary": event.summary})
    return FaultSignal(
        kind=kind,
        gpu=None if kind is FaultKind.AGENT_SILENT else gpu,
        node=node,
        at=event.starts_at,
        evidence=evidence,
    )
