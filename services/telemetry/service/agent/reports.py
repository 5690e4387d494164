"""Pure translation of probe readings into the events the agent publishes."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from libs.common.events.agent import DiscoveredGpu, DiscoveredMigInstance, NodeDiscoveredV1
from libs.common.events.sample_wire import SampleEncoder
from libs.common.events.telemetry import FaultSignaledV1, GpuMetrics, SampleBatchV1
from services.telemetry.domain.metrics import GpuLost, GpuReading, GpuSample, XidEvent
from services.telemetry.domain.probe import NodeDiscovery
from services.telemetry.domain.xid import XID_DESCRIPTIONS, XidCounts

__all__ = [
    "Allocation",
    "encoded_samples",
    "lost_fault",
    "node_discovered",
    "sample_batch",
    "sample_dicts",
    "xid_counts",
    "xid_fault",
]

#: (workload_id, tenant_id) a GPU is allocated to.
Allocation = tuple[str, str]
_FAULT_NS = uuid.UUID("0d5b8a52-3c1e-4f8e-9a3c-1f2b7e6d4c10")


def sample_dicts(
    *,
    readings: Iterable[GpuReading],
    models: Mapping[str, str],
    allocations: Mapping[str, Allocation],
    xid_totals: Mapping[str, int],
    xid_codes: XidCounts | None = None,
) -> list[dict[str, Any]]:
    """GpuMetrics field dicts (None left out): one per GPU, lost ones flagged, one per MIG instance."""
    samples: list[dict[str, Any]] = []
    for reading in readings:
        gpu = reading.gpu_uuid
        common: dict[str, Any] = {"gpu": gpu, "index": reading.index, "model": models.get(gpu, "")}
        common["xid_count"] = xid_totals.get(gpu, 0)
        if codes := xid_counts(xid_codes, gpu):
            common["xid_counts"] = codes
        if gpu in allocations:
            common["workload_id"], common["tenant_id"] = allocations[gpu]
        if isinstance(reading, GpuLost):
            samples.append({**common, "lost_reason": reading.reason})
            continue
        samples.append(_present({**common, **_metrics(reading)}))
        samples.extend(_mig_metrics(reading, common))
    return samples


def encoded_samples(
    *,
    encoder: SampleEncoder,
    readings: Iterable[GpuReading | tuple[Any, ...]],
    models: Mapping[str, str],
    allocations: Mapping[str, Allocation],
    xid_totals: Mapping[str, int],
    xid_codes: XidCounts | None = None,
) -> list[str]:
    """sample_dicts, JSON-encoded; values rows (a fast probe's GPUs that answer) go through a template."""
    out: list[str] = []
    row = encoder.row
    for reading in readings:
        if isinstance(reading, tuple):
            gpu = reading[0]
            out.append(
                row(
                    reading,
                    model=models.get(gpu, ""),
                    xid_count=xid_totals.get(gpu, 0),
                    allocation=allocations.get(gpu),
                    xid_counts=xid_counts(xid_codes, gpu),
                )
            )
        else:
            dicts = sample_dicts(
                readings=[reading],
                models=models,
                allocations=allocations,
                xid_totals=xid_totals,
                xid_codes=xid_codes,
            )
            out.extend(encoder.sample(d) for d in dicts)
    return out


def xid_counts(xid_codes: XidCounts | None, gpu: str) -> dict[int, int] | None:
    """A GPU's XID totals by code, in code order (the sample's xid_counts), or None if it raised none."""
    codes = xid_codes.get(gpu) if xid_codes else None
    return dict(sorted(codes.items())) if codes else None


def sample_batch(
    *,
    node: str,
    at: datetime,
    readings: Iterable[GpuReading],
    models: Mapping[str, str],
    allocations: Mapping[str, Allocation],
    xid_totals: Mapping[str, int],
    xid_codes: XidCounts | None = None,
) -> SampleBatchV1:
    """The same tick as a validated SampleBatchV1 (the agent publishes the dicts through sample_wire)."""
    dicts = sample_dicts(
        readings=readings,
        models=models,
        allocations=allocations,
        xid_totals=xid_totals,
        xid_codes=xid_codes,
    )
    return SampleBatchV1(node=node, at=at, samples=[GpuMetrics.model_validate(d) for d in dicts])


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _metrics(s: GpuSample) -> dict[str, Any]:
    return {
        "sm_util_pct": s.sm_util_pct,
        "mem_util_pct": s.mem_util_pct,
        "fb_used_bytes": s.fb_used_bytes,
        "fb_total_bytes": s.fb_total_bytes,
        "pcie_tx_bytes_per_s": s.pcie_tx_bytes_per_s,
        "pcie_rx_bytes_per_s": s.pcie_rx_bytes_per_s,
        "gpu_temp_c": s.gpu_temp_c,
        "mem_temp_c": s.mem_temp_c,
        "power_w": s.power_w,
        "power_limit_w": s.power_limit_w,
        "sm_clock_mhz": s.sm_clock_mhz,
        "mem_clock_mhz": s.mem_clock_mhz,
        "ecc_sbe_count": s.ecc_sbe_total,
        "ecc_dbe_count": s.ecc_dbe_total,
        "throttle_reasons": s.throttle_reasons,
        "tensor_active_pct": s.tensor_active_pct,  # last, as in sample_wire.METRIC_FIELDS
    }


def _mig_metrics(s: GpuSample, common: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        _present(
            {
                **common,
                "gpu": m.mig_uuid,
                "xid_count": None,
                "xid_counts": None,
                "parent_gpu": s.gpu_uuid,
                "fb_used_bytes": m.fb_used_bytes,
                "fb_total_bytes": m.fb_total_bytes,
                "sm_util_pct": m.sm_util_pct,
            }
        )
        for m in s.mig
    ]


def xid_fault(event: XidEvent, *, total: int) -> FaultSignaledV1:
    """An XID the driver reported, with what it means and how often this GPU has raised it."""
    return FaultSignaledV1(
        fault_id=_fault_id(event.gpu_uuid, f"xid{event.xid}", event.timestamp),
        kind="xid",
        xid=event.xid,
        gpu_uuid=event.gpu_uuid,
        node=event.node,
        at=event.timestamp,
        evidence={
            "xid": event.xid,
            "description": XID_DESCRIPTIONS.get(event.xid, "see NVIDIA's XID catalog"),
            "xid_total_on_gpu": total,
            "gpu_instance_id": event.gpu_instance_id,
            "compute_instance_id": event.compute_instance_id,
            "source": "nvml-event",
        },
    )


def lost_fault(reading: GpuLost) -> FaultSignaledV1:
    """A GPU that stopped answering the probe."""
    return FaultSignaledV1(
        fault_id=_fault_id(reading.gpu_uuid, "lost", reading.timestamp),
        kind="lost",
        gpu_uuid=reading.gpu_uuid,
        node=reading.node,
        at=reading.timestamp,
        evidence={"reason": reading.reason, "index": reading.index, "source": "probe"},
    )


def node_discovered(
    *,
    discovery: NodeDiscovery,
    labels: Mapping[str, str],
    models: Mapping[str, str],
    mig: Mapping[str, tuple[str, ...]],
    source: str,
) -> NodeDiscoveredV1:
    """Discovery facts for inventory; NVLink peers are given as UUIDs where the bus id is known."""
    by_bus = {g.pci_bus_id: g.uuid for g in discovery.gpus if g.pci_bus_id}
    gpus = [
        DiscoveredGpu(
            uuid=g.uuid,
            index=g.index,
            model=models.get(g.uuid, g.model_name),
            memory_bytes=g.memory_bytes or 0,
            pci_bus_id=g.pci_bus_id,
            nvlink_peers=[by_bus.get(p, p) for p in g.nvlink_peers],
            mig_enabled=bool(g.mig_enabled) or bool(mig.get(g.uuid)),
            mig_instances=[
                DiscoveredMigInstance(profile=m.profile or "", slot=m.slot, uuid=m.mig_uuid)
                for m in g.mig_instances
            ]
            + [_mig_from_file(text) for text in mig.get(g.uuid, ())],
        )
        for g in discovery.gpus
    ]
    return NodeDiscoveredV1(
        node=discovery.hostname,
        labels=dict(labels),
        gpus=gpus,
        source="nvml" if source == "nvml" else "simulated",
    )


def _mig_from_file(text: str) -> DiscoveredMigInstance:
    profile, _, slot = text.partition("@")
    return DiscoveredMigInstance(profile=profile.strip(), slot=int(slot) if slot.isdigit() else None)


def _fault_id(gpu: str, what: str, at: datetime) -> str:
    # Deterministic: the same observation re-sent after a restart carries the same id.
    return str(uuid.uuid5(_FAULT_NS, f"{gpu}/{what}/{at.isoformat()}"))
