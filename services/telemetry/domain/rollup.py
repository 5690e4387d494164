"""Rollups: per GPU and window, the average, maximum and 95th percentile of each rolled-up metric.

Pure: samples and the clock are passed in. Values are kept in one compact float array per GPU window
(one row of len(ROLLED_UP) per sample, NaN where a metric is missing) until the window closes (a
10,000-GPU fleet holds about 40 MB for a one-minute window).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Mapping
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


_WIDTH = len(ROLLED_UP)
_NAN = math.nan


@dataclass(slots=True)
class _Open:
    node: str
    model: str
    samples: int = 0
    workload_id: str | None = None
    tenant_id: str | None = None
    rows: array[float] = field(default_factory=lambda: array("d"))  # _WIDTH values per sample


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
        self.add_batch(node=node, at=at, samples=(sample,))

    def add_batch(self, *, node: str, at: float, samples: Iterable[Mapping[str, Any]]) -> None:
        """add() for every sample of one node batch taken at epoch `at`."""
        start = window_start(at, window_s=self.window_s)
        if start + self.window_s <= self._closed_until:
            # Its window was written already; a second, partial window would overwrite the full one.
            self.late_samples += sum(1 for _ in samples)
            return
        windows = self._open
        for sample in samples:
            key = (sample["gpu"], start)
            win = windows.get(key)
            if win is None:
                win = windows[key] = _Open(node=node, model=sample.get("model") or "")
            win.samples += 1
            get = sample.get
            win.workload_id = get("workload_id") or win.workload_id
            win.tenant_id = get("tenant_id") or win.tenant_id
            used, total = get("fb_used_bytes"), get("fb_total_bytes")
            row: list[Any] = [
                get("sm_util_pct"),
                get("mem_util_pct"),
                100.0 * used / total if used is not None and total else None,
                get("gpu_temp_c"),
                get("mem_temp_c"),
                get("power_w"),
                get("pcie_rx_bytes_per_s"),
                get("pcie_tx_bytes_per_s"),
            ]
            if None in row:
                row = [_NAN if v is None else v for v in row]
            try:
                win.rows.fromlist(row)  # all or nothing
            except TypeError:
                win.rows.fromlist([float(v) for v in row])  # numbers sent as strings, as float() reads them

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
                stats=_window_stats(win.rows),
            )

    @property
    def open_windows(self) -> int:
        """Windows still collecting."""
        return len(self._open)


def _window_stats(rows: array[float]) -> dict[str, dict[str, float]]:
    """Stats per rolled-up metric over the samples that carried it (metrics none carried are left out)."""
    stats: dict[str, dict[str, float]] = {}
    for i, name in enumerate(ROLLED_UP):
        present = [v for v in rows[i::_WIDTH] if v == v]  # NaN marks a sample without the metric
        if present:
            stats[name] = _stats(present)
    return stats


def _stats(col: list[float]) -> dict[str, float]:
    return {"avg": round(sum(col) / len(col), 3), "max": max(col), "p95": percentile(col, 95)}
