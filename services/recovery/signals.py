"""Translation of other services' events into the core's inputs: fault signals and telemetry samples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from libs.common.events.alerting import AlertFiredV1
from libs.common.events.telemetry import FaultSignaledV1, GpuMetrics
from services.recovery.classify import EvidenceValue, FaultKind, FaultSignal
from services.recovery.correlate import TelemetrySample

__all__ = ["ALERT_KINDS", "from_alert", "from_fault", "to_samples", "window_entry"]

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


def window_entry(metrics: GpuMetrics, *, at: datetime) -> dict[str, Any]:
    """The compact record the rolling window keeps for one GPU and one second."""
    fb = metrics.fb_used_pct
    return {
        "at": at.isoformat(),
        "sm": metrics.sm_util_pct or 0.0,
        "fb": min(max(fb or 0.0, 0.0), 100.0),
        "tx": metrics.pcie_tx_bytes_per_s or 0.0,
        "rx": metrics.pcie_rx_bytes_per_s or 0.0,
        "t": metrics.gpu_temp_c or 0.0,
        "p": metrics.power_w or 0.0,
        "pl": metrics.power_limit_w or 0.0,
        "thr": metrics.throttle_reasons or 0,
        "xid": metrics.xid_count or 0,
    }


def to_samples(gpu: str, entries: Sequence[Mapping[str, Any]], *, until: datetime) -> list[TelemetrySample]:
    """Window records (any order) up to ``until`` as samples; the XID counter becomes XIDs per second."""
    ordered = sorted(entries, key=lambda e: str(e["at"]))
    samples: list[TelemetrySample] = []
    previous: int | None = None
    for e in ordered:
        at = datetime.fromisoformat(str(e["at"]))
        counter = int(e["xid"])
        if at <= until:
            samples.append(_sample(gpu, e, at=at, xids=max(counter - (previous or counter), 0)))
        previous = counter
    return samples


def _sample(gpu: str, e: Mapping[str, Any], *, at: datetime, xids: int) -> TelemetrySample:
    power = max(float(e["p"]), 0.0)
    return TelemetrySample(
        gpu=gpu,
        at=at,
        sm_util_pct=min(max(float(e["sm"]), 0.0), 100.0),
        fb_used_pct=float(e["fb"]),
        pcie_tx_bytes_per_s=max(float(e["tx"]), 0.0),
        pcie_rx_bytes_per_s=max(float(e["rx"]), 0.0),
        gpu_temp_c=float(e["t"]),
        power_w=power,
        # No reported limit: use the draw itself, which makes the capping rule a no-op.
        power_limit_w=float(e["pl"]) or power * 2 or 1.0,
        throttle_reasons=max(int(e["thr"]), 0),
        xid_count=xids,
    )
