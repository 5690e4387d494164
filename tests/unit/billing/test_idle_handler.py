from __future__ import annotations

from datetime import timedelta

from libs.common.events.billing import IdleReclaimV1
from libs.common.events.telemetry import GpuRollup, NodeRollupV1
from libs.common.testing import FakeUnitOfWork, handler_context
from services.billing.adapters.allocation_store_fake import FakeAllocationStore, IdleActionRecord
from services.billing.domain.idle import IdlePolicy, IdleState
from services.billing.service.handlers import BillingDeps, on_node_rollup
from services.billing.service.metering import MeteringConfig
from tests.unit.billing.factories import T0, minutes

# A short policy keeps the history small; the rules are the same as for 72 h / 24 h.
POLICY = IdlePolicy(idle_after=timedelta(hours=1), grace=timedelta(minutes=30))


def _rollup(minute: int, *, util: float) -> NodeRollupV1:
    gpus = [
        GpuRollup(gpu="gpu-a", sm_util_max=util, samples=60, workload_id="w1", tenant_id="acme"),
        GpuRollup(gpu="gpu-b", sm_util_max=None, samples=60, workload_id="w1", tenant_id="acme"),
    ]
    return NodeRollupV1(node="node-a", minute=T0 + minutes(minute), gpus=gpus)


async def _deliver(event: NodeRollupV1, store: FakeAllocationStore) -> FakeUnitOfWork:
    uow = FakeUnitOfWork()
    deps = BillingDeps(metering=MeteringConfig(), idle=POLICY, idle_states=lambda _uow: store)
    async with uow:
        await on_node_rollup(event, handler_context(event, uow=uow, deps=deps))
        await uow.commit()
    return uow


async def test_an_instance_idle_for_the_whole_period_is_warned_once_and_the_warning_is_kept() -> None:
    store = FakeAllocationStore()
    store.open("w1", tenant_id="acme", kind="instance")
    store.idle["w1"] = IdleState(idle_since=T0, observed_until=T0 + minutes(59))

    uow = await _deliver(_rollup(59, util=1.0), store)

    assert uow.events == [IdleReclaimV1(tenant_id="acme", workload_id="w1", stage="warning", idle_hours=1.0)]
    assert store.actions == [IdleActionRecord("w1", "acme", "warning", 1.0, T0 + minutes(60))]


async def test_a_job_is_never_reclaimed_however_idle_it_is() -> None:
    store = FakeAllocationStore()
    store.open("w1", tenant_id="acme", kind="job")
    store.idle["w1"] = IdleState(idle_since=T0, observed_until=T0 + minutes(59))

    uow = await _deliver(_rollup(59, util=1.0), store)

    assert uow.events == []
    assert store.idle["w1"] == IdleState(idle_since=T0, observed_until=T0 + minutes(59))
