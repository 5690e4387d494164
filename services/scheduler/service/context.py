"""What the scheduler's routes, handlers and placer share within one process."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta

from libs.common.runtime import ServiceRuntime
from services.scheduler.adapters.postgres import Pool
from services.scheduler.adapters.quota_store import QuotaStore, RedisQuotaStore
from services.scheduler.adapters.unit_of_work import PostgresSchedulerUnitOfWork
from services.scheduler.domain.catalog import ImageCatalog
from services.scheduler.domain.decisions import SchedulerConfig
from services.scheduler.domain.gpu_models import GpuModels
from services.scheduler.domain.reserved import ReservedPoolConfig
from services.scheduler.service.options import SchedulerOptions

__all__ = ["SchedulerContext"]


@dataclass
class SchedulerContext:
    """Settings, runtime, image catalog, quota store and the placer's wake-up signal."""

    settings: SchedulerOptions
    runtime: ServiceRuntime
    catalog: ImageCatalog
    models: GpuModels
    quota_override: QuotaStore | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    is_leader: bool = False
    passes: int = 0
    #: Workloads the last pass left waiting (a quota given back since may let them in).
    left_waiting: int = 0
    placer_pool: Pool | None = None
    submit_pool: Pool | None = None
    _quotas: QuotaStore | None = None

    @property
    def quotas(self) -> QuotaStore:
        """The quota store (Redis unless a fake was given); built once the runtime has started."""
        if self._quotas is None:
            self._quotas = self.quota_override or RedisQuotaStore(
                redis=self.runtime.redis, keys=self.runtime.keys
            )
        return self._quotas

    def uow(self) -> PostgresSchedulerUnitOfWork:
        """A new unit of work on the runtime's pool, with the scheduler's stores."""
        return PostgresSchedulerUnitOfWork(pool=self.runtime.pool, source=self.settings.service_name)

    def placer_uow(self) -> PostgresSchedulerUnitOfWork:
        """A unit of work on the placer's own pool, so a flood of requests never starves placement."""
        return PostgresSchedulerUnitOfWork(pool=self.pool_for_placer, source=self.settings.service_name)

    @property
    def pool_for_submissions(self) -> Pool:
        """The submissions' pool once open (no per-release reset round trip), else the runtime's."""
        return self.submit_pool or self.runtime.pool

    @property
    def pool_for_placer(self) -> Pool:
        """The placer's pool while it leads, else the runtime's."""
        return self.placer_pool or self.runtime.pool

    @property
    def half_life(self) -> timedelta:
        """Fair-share usage half-life."""
        return timedelta(hours=self.settings.half_life_hours)

    def config(self) -> SchedulerConfig:
        """Knobs of one schedule pass."""
        reserved = ReservedPoolConfig(
            high_threshold=self.settings.high_threshold, high_cap=self.settings.high_cap
        )
        return SchedulerConfig(
            reserved=reserved, preemption_grace=timedelta(seconds=self.settings.preemption_grace_s)
        )
