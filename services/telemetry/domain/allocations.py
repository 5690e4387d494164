"""Who holds which GPU, cached from the allocations table (refreshed about every second)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["AllocationRow", "AllocationView"]


@dataclass(frozen=True, slots=True)
class AllocationRow:
    """One GPU held by one workload."""

    gpu_uuid: str
    workload_id: str
    tenant_id: str
    node: str


@dataclass
class AllocationView:
    """An immutable-by-convention snapshot; ``replace`` swaps in a new one."""

    by_gpu: dict[str, AllocationRow] = field(default_factory=dict)
    by_workload: dict[str, list[AllocationRow]] = field(default_factory=dict)
    by_tenant: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Sequence[AllocationRow]) -> AllocationView:
        """Index rows; with several workloads on one GPU (MIG, time-slicing) labels name the first."""
        view = cls()
        for row in rows:
            view.by_gpu.setdefault(row.gpu_uuid, row)
            view.by_workload.setdefault(row.workload_id, []).append(row)
            view.by_tenant.setdefault(row.tenant_id, set()).add(row.gpu_uuid)
        return view

    def labels(self, gpu: str) -> tuple[str | None, str | None]:
        """(workload id, tenant id) of a GPU, or (None, None) when free."""
        row = self.by_gpu.get(gpu)
        return (row.workload_id, row.tenant_id) if row else (None, None)

    def visible(self, gpu: str, *, tenant: str | None) -> bool:
        """Whether a caller scoped to `tenant` (None = admin, all) may see this GPU."""
        return tenant is None or gpu in self.by_tenant.get(tenant, set())
