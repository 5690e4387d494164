"""A hand-written in-memory QuotaStore for tests and benches; the contract test keeps it honest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.scheduler.adapters.quota_store import HeldQuota, RebuildNeeded
from services.scheduler.domain.quota import QuotaLimits, QuotaUsage, check, release

__all__ = ["FakeQuotaStore"]


class FakeQuotaStore:
    """Same answers as RedisQuotaStore; ``lose_data`` plays a Redis FLUSHDB."""

    def __init__(self) -> None:
        self._built = False
        self._limits: dict[str, QuotaLimits] = {}
        self._usage: dict[str, QuotaUsage] = {}
        self._held: dict[str, dict[str, QuotaUsage]] = {}

    def lose_data(self) -> None:
        """Forget everything, marker included."""
        self.__init__()  # type: ignore[misc]

    def _require_built(self) -> None:
        if not self._built:
            raise RebuildNeeded("quota marker missing")

    async def reserve(self, *, tenant: str, placement_id: str, demand: QuotaUsage) -> tuple[str, ...]:
        self._require_built()
        held = self._held.setdefault(tenant, {})
        if placement_id in held:
            return ()
        usage = self._usage.get(tenant, QuotaUsage())
        exceeded = check(limits=self._limits.get(tenant, QuotaLimits()), usage=usage, demand=demand)
        if exceeded:
            return exceeded
        self._usage[tenant] = QuotaUsage(
            usage.gpus + demand.gpus,
            usage.units_milli + demand.units_milli,
            usage.workloads + demand.workloads,
        )
        held[placement_id] = demand
        return ()

    async def release(self, *, tenant: str, placement_id: str) -> bool:
        self._require_built()
        demand = self._held.get(tenant, {}).pop(placement_id, None)
        if demand is None:
            return False
        self._usage[tenant] = release(usage=self._usage.get(tenant, QuotaUsage()), demand=demand)
        return True

    async def reserve_many(self, items: Sequence[tuple[str, str, QuotaUsage]]) -> list[tuple[str, ...]]:
        return [await self.reserve(tenant=t, placement_id=p, demand=d) for t, p, d in items]

    async def release_many(self, items: Sequence[tuple[str, str]]) -> list[bool]:
        return [await self.release(tenant=t, placement_id=p) for t, p in items]

    async def set_limits(self, *, tenant: str, limits: QuotaLimits) -> None:
        self._limits[tenant] = limits

    async def usage(self, *, tenant: str) -> QuotaUsage:
        return self._usage.get(tenant, QuotaUsage())

    async def intact(self) -> bool:
        return self._built

    async def rebuild(self, *, limits: Mapping[str, QuotaLimits], held: Sequence[HeldQuota]) -> None:
        self.__init__()  # type: ignore[misc]
        self._limits = dict(limits)
        for h in held:
            self._held.setdefault(h.tenant, {})[h.placement_id] = h.demand
            u = self._usage.get(h.tenant, QuotaUsage())
            self._usage[h.tenant] = QuotaUsage(
                u.gpus + h.demand.gpus, u.units_milli + h.demand.units_milli, u.workloads + h.demand.workloads
            )
        self._built = True
