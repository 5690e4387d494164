"""XID counting: XIDs are events, so telemetry keeps monotonic counters per GPU and code."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from services.telemetry.domain.metrics import XidEvent

__all__ = ["XID_DESCRIPTIONS", "XidCounter", "XidCounts"]

XidCounts = Mapping[str, Mapping[int, int]]

# The XIDs the simulator injects and recovery cares most about (NVIDIA's XID catalog, shortened).
XID_DESCRIPTIONS: dict[int, str] = {
    13: "graphics engine exception (often an application bug)",
    31: "GPU memory page fault (illegal address)",
    43: "GPU stopped processing (reset channel)",
    48: "double-bit ECC error",
    63: "ECC page retirement / row remap recorded",
    64: "ECC page retirement / row remap failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
}


class XidCounter:
    """Monotonic XID totals per GPU and code, plus the delta since the previous take_delta()."""

    def __init__(self) -> None:
        self._totals: dict[str, Counter[int]] = {}
        self._delta: dict[str, Counter[int]] = {}

    def record(self, events: Iterable[XidEvent]) -> None:
        """Count each event once; totals never decrease."""
        for event in events:
            self._totals.setdefault(event.gpu_uuid, Counter())[event.xid] += 1
            self._delta.setdefault(event.gpu_uuid, Counter())[event.xid] += 1

    def totals(self) -> dict[str, dict[int, int]]:
        """All-time counts by GPU uuid then XID code (a copy)."""
        return {gpu: dict(counts) for gpu, counts in self._totals.items()}

    @property
    def by_gpu(self) -> XidCounts:
        """All-time counts by GPU uuid then XID code, live (no copy: the agent reads it every tick)."""
        return self._totals

    def total(self, *, gpu_uuid: str, xid: int) -> int:
        """All-time count of one XID code on one GPU."""
        return self._totals.get(gpu_uuid, Counter())[xid]

    def take_delta(self) -> dict[str, dict[int, int]]:
        """Counts recorded since the previous call, then start a new interval."""
        delta = {gpu: dict(counts) for gpu, counts in self._delta.items()}
        self._delta = {}
        return delta
