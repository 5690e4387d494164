"""Rollups: per GPU and window, the average, maximum and 95th percentile of each rolled-up metric.

Pure: samples and the clock are passed in. Values are kept in compact float arrays until the window
closes (a 10,000-GPU fleet holds about 40 MB for a one-minute window).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["ROLLED_UP", "GpuWindow", "RollupAccumulator", "percentile", "window_start"]

#: GpuMetrics fields rolled up (fb_used_pct is derived from fb_used_bytes / fb_total_bytes).
ROLLED_UP: tuple[str, ...] = (
    "sm_util_pct",
    "mem_util_pct",
    "fb_used_pct",
    "gpu_temp_c",
    "mem_temp_c",
    "power_w",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
)


@dataclass(frozen=True, slots=True)
class GpuWindow:
    """One GPU's closed window."""

    gpu: str
    node: str
    model: str
    window_start: datetime
    window_s: float
    samples: int
    workload_id: str | None
    tenant_id: str | None
    stats: dict[str, dict[str, float]]


@dataclass(slots=True)
class _Open:
    node: str
    model: str
    samples: int = 0
    workload_id: str | None = None
    tenant_id: str | None = None
    values: dict[str, array[float]] = field(default_factory=dict)


def window_start(at: float, *, window_s: float) -> float:
    """Epoch start of the window holding `at` (windows are aligned to the epoch)."""
    return math.floor(at / window_s) * window_s


def percentile(values: array[float] | list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


class RollupAccumulator:
    """Collects samples into aligned windows; ``close`` hands back the windows that are over."""

    def __init__(self, *, window_s: float) -> None:
        self.window_s = window_s
        self._open: dict[tuple[str, float], _Open] = {}
        self.late_samples = 0
        self._closed_until = 0.0  # end of the latest closed window

    def add(self, *, node: str, at: float, sample: Mapping[str, Any]) -> None:
        """Add one GpuMetrics (as a dict) taken at epoch `at`; samples for closed windows are dropped."""
        start = window_start(at, window_s=self.window_s)
        if start + self.window_s <= self._closed_until:
            # Its window was written already; a second, partial window would overwrite the full one.
            self.late_samples += 1
            return
        gpu = sample["gpu"]
        win = self._open.get((gpu, start))
        if win is None:
            win = self._open[(gpu, start)] = _Open(node=node, model=sample.get("model") or "")
        win.samples += 1
        win.workload_id = sample.get("workload_id") or win.workload_id
        win.tenant_id = sample.get("tenant_id") or win.tenant_id
        for name, value in _values(sample):
            col = win.values.get(name)
            if col is None:
                col = win.values[name] = array("d")
            col.append(value)

    def close(self, *, now: float, grace_s: float) -> Iterator[GpuWindow]:
        """Remove and yield every window that ended at least `grace_s` before `now`; later ones stay open."""
        cutoff = window_start(now - grace_s, window_s=self.window_s)
        self._closed_until = max(self._closed_until, cutoff)
        done = [k for k in self._open if k[1] + self.window_s <= cutoff]
        for key in done:
            win = self._open.pop(key)
            yield GpuWindow(
                gpu=key[0],
                node=win.node,
                model=win.model,
                window_start=datetime.fromtimestamp(key[1], tz=UTC),
                window_s=self.window_s,
                samples=win.samples,
                workload_id=win.workload_id,
                tenant_id=win.tenant_id,
                stats={name: _stats(col) for name, col in win.values.items()},
            )

    @property
    def open_windows(self) -> int:
        """Windows still collecting."""
        return len(self._open)


def _values(sample: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    for name in ROLLED_UP:
        if name == "fb_used_pct":
            used, total = sample.get("fb_used_bytes"), sample.get("fb_total_bytes")
            if used is not None and total:
                yield name, 100.0 * used / total
            continue
        value = sample.get(name)
        if value is not None:
            yield name, float(value)


def _stats(col: array[float]) -> dict[str, float]:
    return {"avg": round(sum(col) / len(col), 3), "max": max(col), "p95": percentile(col, 95)}
