"""Root-cause hints: correlate the telemetry before a fault and recent faults into a diagnosis."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

__all__ = [
    "THROTTLE_POWER_MASK",
    "THROTTLE_THERMAL_MASK",
    "Cause",
    "CorrelationThresholds",
    "Diagnosis",
    "FaultContext",
    "Finding",
    "RecentFault",
    "TelemetrySample",
    "diagnose",
]

# NVML clocks-event (throttle) reason bits.
THROTTLE_SW_POWER_CAP = 0x04
THROTTLE_SW_THERMAL = 0x20
THROTTLE_HW_THERMAL = 0x40
THROTTLE_HW_POWER_BRAKE = 0x80
THROTTLE_THERMAL_MASK = THROTTLE_SW_THERMAL | THROTTLE_HW_THERMAL
THROTTLE_POWER_MASK = THROTTLE_SW_POWER_CAP | THROTTLE_HW_POWER_BRAKE

Evidence = dict[str, float | int | str]


class Cause(StrEnum):
    """Probable root cause of a fault."""

    PCIE_SATURATION = "pcie_saturation"
    THERMAL_THROTTLING = "thermal_throttling"
    POWER_CAPPING = "power_capping"
    MEMORY_EXHAUSTION = "memory_exhaustion"
    NODE_OR_INTERCONNECT = "node_or_interconnect"
    APPLICATION_BUG = "application_bug"
    GPU_FELL_OFF_BUS = "gpu_fell_off_bus"
    UNKNOWN = "unknown"


class TelemetrySample(BaseModel):
    """One per-second sample of one GPU, as telemetry records it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    gpu: str
    at: AwareDatetime
    sm_util_pct: float = Field(ge=0, le=100)
    fb_used_pct: float = Field(ge=0, le=100)
    pcie_tx_bytes_per_s: float = Field(ge=0)
    pcie_rx_bytes_per_s: float = Field(ge=0)
    gpu_temp_c: float
    power_w: float = Field(ge=0)
    power_limit_w: float = Field(gt=0)
    throttle_reasons: int = Field(ge=0, description="NVML clocks-event reasons bitmask")
    xid_count: int = Field(ge=0, description="XIDs seen on this GPU during the sample's second")


class RecentFault(BaseModel):
    """A fault recovery already knows about, as the correlation rules need it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fault_type: str
    gpu: str | None
    node: str
    workload_ids: tuple[str, ...] = ()
    at: AwareDatetime


class FaultContext(BaseModel):
    """The fault being diagnosed: where it happened and what ran there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str | None
    node: str
    workload_ids: tuple[str, ...] = ()
    at: AwareDatetime


class CorrelationThresholds(BaseModel):
    """Where each rule starts to fire."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # PCIe Gen4 x16 carries about 32 GB/s each way; a Gen5 fleet passes its own figure.
    pcie_link_bytes_per_s: float = Field(default=32e9, gt=0)
    pcie_saturated_ratio: float = Field(default=0.9, gt=0, le=1)
    # H100/A100 start slowing down in the high 80s °C; throttle bits catch the rest.
    thermal_temp_c: float = 87.0
    power_capped_ratio: float = Field(default=0.98, gt=0, le=1)
    fb_full_pct: float = Field(default=97.0, gt=0, le=100)
    # A condition must hold for this share of the window: one hot second is not a cause.
    sustained_share: float = Field(default=0.5, gt=0, le=1)
    recent_fault_window: timedelta = timedelta(minutes=10)


class Finding(BaseModel):
    """One rule that fired, with the numbers that made it fire."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    cause: Cause
    confidence: float = Field(ge=0, le=1)
    evidence: Evidence


class Diagnosis(BaseModel):
    """The most probable cause of a fault and every finding behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    probable_cause: Cause
    confidence: float = Field(ge=0, le=1)
    findings: tuple[Finding, ...] = ()


def _share(samples: Sequence[TelemetrySample], hit: Callable[[TelemetrySample], bool]) -> float:
    return sum(1 for s in samples if hit(s)) / len(samples) if samples else 0.0


def _sustained(
    rule: str, cause: Cause, share: float, limits: CorrelationThresholds, ev: Evidence
) -> Finding | None:
    """A finding whose confidence grows with how much of the window the condition held."""
    if share < limits.sustained_share:
        return None
    return Finding(
        rule=rule, cause=cause, confidence=round(0.5 + 0.4 * share, 3), evidence=ev | {"share": share}
    )


def _pcie(samples: Sequence[TelemetrySample], limits: CorrelationThresholds) -> Finding | None:
    """PCIe saturation: either direction near the link's capacity."""
    ceiling = limits.pcie_saturated_ratio * limits.pcie_link_bytes_per_s
    share = _share(samples, lambda s: max(s.pcie_tx_bytes_per_s, s.pcie_rx_bytes_per_s) >= ceiling)
    peak = max((max(s.pcie_tx_bytes_per_s, s.pcie_rx_bytes_per_s) for s in samples), default=0.0)
    ev: Evidence = {"peak_bytes_per_s": peak, "threshold_bytes_per_s": ceiling}
    return _sustained("pcie_saturation", Cause.PCIE_SATURATION, share, limits, ev)


def _thermal(samples: Sequence[TelemetrySample], limits: CorrelationThresholds) -> Finding | None:
    """Thermal throttling: thermal throttle bits set or temperature past the slowdown point."""
    share = _share(
        samples,
        lambda s: bool(s.throttle_reasons & THROTTLE_THERMAL_MASK) or s.gpu_temp_c >= limits.thermal_temp_c,
    )
    ev: Evidence = {"max_temp_c": max((s.gpu_temp_c for s in samples), default=0.0)}
    return _sustained(
        "thermal_throttling",
        Cause.THERMAL_THROTTLING,
        share,
        limits,
        ev | {"threshold_c": limits.thermal_temp_c},
    )


def _power(samples: Sequence[TelemetrySample], limits: CorrelationThresholds) -> Finding | None:
    """Power capping: power throttle bits set or drawing at the power limit."""
    share = _share(
        samples,
        lambda s: (
            bool(s.throttle_reasons & THROTTLE_POWER_MASK)
            or s.power_w >= limits.power_capped_ratio * s.power_limit_w
        ),
    )
    ev: Evidence = {
        "max_power_w": max((s.power_w for s in samples), default=0.0),
        "power_limit_w": max((s.power_limit_w for s in samples), default=0.0),
    }
    return _sustained("power_capping", Cause.POWER_CAPPING, share, limits, ev)


def _memory(samples: Sequence[TelemetrySample], limits: CorrelationThresholds) -> Finding | None:
    """Memory near 100%: frame buffer almost full."""
    share = _share(samples, lambda s: s.fb_used_pct >= limits.fb_full_pct)
    ev: Evidence = {
        "max_fb_used_pct": max((s.fb_used_pct for s in samples), default=0.0),
        "threshold_pct": limits.fb_full_pct,
    }
    return _sustained("memory_near_full", Cause.MEMORY_EXHAUSTION, share, limits, ev)


def _recent_elsewhere(
    fault: FaultContext, recent: Sequence[RecentFault], limits: CorrelationThresholds
) -> list[RecentFault]:
    """Faults close in time to this one, on GPUs other than this one."""
    window = limits.recent_fault_window
    return [r for r in recent if abs(r.at - fault.at) <= window and (r.gpu is None or r.gpu != fault.gpu)]


def _shares_workload(fault: FaultContext, other: RecentFault) -> bool:
    return bool(set(fault.workload_ids) & set(other.workload_ids))


def _application(fault: FaultContext, others: Sequence[RecentFault]) -> Finding | None:
    """The same workload failing on other GPUs points at the workload, not the hardware."""
    hits = [r for r in others if r.gpu is not None and _shares_workload(fault, r)]
    if not hits:
        return None
    gpus = sorted({r.gpu for r in hits if r.gpu is not None})
    workloads = sorted({w for r in hits for w in r.workload_ids} & set(fault.workload_ids))
    ev: Evidence = {"other_gpus": len(gpus), "gpus": ",".join(gpus), "workloads": ",".join(workloads)}
    return Finding(
        rule="same_workload_failing_elsewhere",
        cause=Cause.APPLICATION_BUG,
        confidence=round(min(0.95, 0.6 + 0.15 * len(gpus)), 3),
        evidence=ev,
    )


def _node(
    fault: FaultContext, others: Sequence[RecentFault], peers: Sequence[TelemetrySample]
) -> Finding | None:
    """Other GPUs on the same node failing with other work points at the node, board or interconnect."""
    # Faults that share this fault's workload are the application rule's evidence, not the node's.
    app_gpus = {r.gpu for r in others if _shares_workload(fault, r)}
    from_faults = {r.gpu or r.node for r in others if r.node == fault.node and r.gpu not in app_gpus}
    from_xids = {s.gpu for s in peers if s.xid_count > 0 and s.gpu != fault.gpu and s.gpu not in app_gpus}
    failing = sorted(from_faults | from_xids)
    if not failing:
        return None
    ev: Evidence = {"failing_peers": len(failing), "peers": ",".join(failing), "node": fault.node}
    return Finding(
        rule="peers_on_node_failing",
        cause=Cause.NODE_OR_INTERCONNECT,
        confidence=round(min(0.9, 0.5 + 0.15 * len(failing)), 3),
        evidence=ev,
    )


def diagnose(
    *,
    fault: FaultContext,
    own_samples: Sequence[TelemetrySample],
    peer_samples: Sequence[TelemetrySample] = (),
    recent_faults: Sequence[RecentFault] = (),
    limits: CorrelationThresholds | None = None,
    prior: Finding | None = None,
) -> Diagnosis:
    """Run every rule over the window before the fault; the most confident finding is the probable cause.

    prior is what the fault itself says (the catalog's meaning of it, see catalog.catalog_finding): the
    cause when the telemetry shows nothing, and outweighed by any telemetry finding (it comes last and
    its confidence is below every rule's).
    """
    limits = limits or CorrelationThresholds()
    others = _recent_elsewhere(fault, recent_faults, limits)
    candidates = [
        _application(fault, others),
        _node(fault, others, peer_samples),
        _pcie(own_samples, limits),
        _thermal(own_samples, limits),
        _power(own_samples, limits),
        _memory(own_samples, limits),
        prior,
    ]
    findings = tuple(f for f in candidates if f is not None)
    if not findings:
        return Diagnosis(probable_cause=Cause.UNKNOWN, confidence=0.0)
    # max() keeps the first of equals, so the list order above breaks ties: relational rules first.
    best = max(findings, key=lambda f: f.confidence)
    return Diagnosis(probable_cause=best.cause, confidence=best.confidence, findings=findings)
