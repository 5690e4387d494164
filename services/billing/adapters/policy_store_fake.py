"""An in-memory twin of PolicyStore for unit tests: default tags, tag policies, flagged workloads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from services.billing.domain.tags import FlaggedWorkload

__all__ = ["FakePolicyStore"]


class FakePolicyStore:
    """Default tags and required keys by tenant, and flagged workloads (``flagged``), as PolicyStore
    keeps them."""

    def __init__(self) -> None:
        self.tags: dict[str, dict[str, str]] = {}
        self.policies: dict[str, list[str]] = {}
        self.flagged: list[FlaggedWorkload] = []

    async def tenant_tags(self, tenant_id: str) -> dict[str, str]:
        """A tenant's default tags."""
        return dict(self.tags.get(tenant_id, {}))

    async def set_tenant_tags(self, tenant_id: str, tags: Mapping[str, str]) -> None:
        """Replace a tenant's default tags."""
        self.tags[tenant_id] = dict(tags)

    async def required(self, tenant_id: str) -> frozenset[str]:
        """The tag keys a tenant's workloads must carry."""
        return frozenset(self.policies.get(tenant_id, ()))

    async def set_required(self, tenant_id: str, keys: Sequence[str]) -> None:
        """Replace a tenant's required-tag policy."""
        self.policies[tenant_id] = sorted(set(keys))

    async def flag(
        self, *, workload_id: str, placement_id: str, tenant_id: str, missing: Sequence[str], at: datetime
    ) -> None:
        """Flag a workload placed without required tags (once per workload and placement)."""
        if any((f.workload_id, f.placement_id) == (workload_id, placement_id) for f in self.flagged):
            return
        self.flagged.append(
            FlaggedWorkload(
                workload_id=workload_id,
                placement_id=placement_id,
                tenant_id=tenant_id,
                missing=tuple(missing),
                flagged_at=at,
            )
        )
