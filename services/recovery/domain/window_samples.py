"""Telemetry window records as samples: the form correlation reads, with the XID counter as a rate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from services.recovery.domain.correlate import TelemetrySample
from services.recovery.domain.health import GpuReading

__all__ = ["to_readings", "to_samples"]


def _ordered(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(entries, key=lambda e: datetime.fromisoformat(str(e["at"])))


def to_samples(gpu: str, entries: Sequence[Mapping[str, Any]], *, until: datetime) -> list[TelemetrySample]:
    """Window records (any order) up to ``until`` as samples; the XID counter becomes XIDs per second.

    Records of the GPU reported lost carry no metrics, so they are no sample (their XID count still counts).
    """
    samples: list[TelemetrySample] = []
    previous: int | None = None
    for e in _ordered(entries):
        at = datetime.fromisoformat(str(e["at"]))
        counter = int(e["xid"])
        if at <= until and not e.get("lost"):
            samples.append(_sample(gpu, e, at=at, xids=max(counter - (previous or counter), 0)))
        previous = counter
    return samples


def to_readings(gpu: str, entries: Sequence[Mapping[str, Any]]) -> list[GpuReading]:
    """Window records (any order) as readings, oldest first: when, and whether the GPU answered."""
    return [
        GpuReading(gpu=gpu, at=datetime.fromisoformat(str(e["at"])), answering=not e.get("lost"))
        for e in _ordered(entries)
    ]


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
