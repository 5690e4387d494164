"""Where a workload runs now, as recovery learns it from the scheduler."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Placement"]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one workload runs now."""

    workload_id: str
    tenant_id: str
    placement_id: str
    node: str
    gpus: tuple[str, ...]
