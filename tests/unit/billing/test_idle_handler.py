from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from libs.common.events.billing import IdleReclaimV1
from libs.common.events.telemetry import GpuRollup, NodeRollupV1
from libs.common.testing import handler_context
from services.billing.adapters.allocation_store_fake import FakeAllocationStore
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.idle import IdleActionRecord, IdlePolicy, IdleState
from services.billing.domain.rating import Allocation
from services.billing.service.handlers import BillingDeps, on_node_rollup
from services.billing.service.metering import MeteringConfig
from tests.unit.billing.factories import T0, allocation, minutes

# A short policy keeps the history small; the rules are the same as for 72 h / 24 h.
POLICY = IdlePolicy(idle_after=timedelta(hours=1), grace=timedelta(minutes=30))
DEPS = BillingDeps(metering=MeteringConfig(), idle=POLICY)


def _w1(allocation_id: str) -> Allocation:
    return replace(allocation(allocation_id), workload_id="w1")


async def _placed(*, kind: str) -> FakeAllocationStore:
    """A store in which workload w1 of acme holds two GPUs and runs, as metering opens and starts them."""
    store = FakeAllocationStore()
    for gpu in ("a", "b"):
        await store.open_allocation(allocation=_w1(f"p1/{gpu}"), placement_id="p1", kind=kind)
    await store.start_placement("p1", at=T0)
    return store


def _rollup(minute: int, *, util: float) -> NodeRollupV1:
    gpus = [
        GpuRollup(gpu="gpu-a", sm_util_max=util, samples=60, workload_id="w1", tenant_id="acme"),
        GpuRollup(gpu="gpu-b", sm_util_max=None, samples=60, workload_id="w1", tenant_id="acme"),
    ]
    return NodeRollupV1(node="node-a", minute=T0 + minutes(minute), gpus=gpus)


async def _deliver(event: NodeRollupV1, store: FakeAllocationStore) -> FakeBillingUnitOfWork:
    uow = FakeBillingUnitOfWork(allocations=store)
    async with uow:
        await on_node_rollup(event, handler_context(event, uow=uow, deps=DEPS))
        await uow.commit()
    return uow


async def test_an_instance_idle_for_the_whole_period_is_warned_once_and_the_warning_is_kept() -> None:
    store = await _placed(kind="instance")
    store.idle["w1"] = IdleState(idle_since=T0, observed_until=T0 + minutes(59))

    uow = await _deliver(_rollup(59, util=1.0), store)

    assert uow.events == [IdleReclaimV1(tenant_id="acme", workload_id="w1", stage="warning", idle_hours=1.0)]
    assert store.actions == [IdleActionRecord("w1", "acme", "warning", 1.0, T0 + minutes(60))]


async def test_a_job_is_never_reclaimed_however_idle_it_is() -> None:
    store = await _placed(kind="job")
    store.idle["w1"] = IdleState(idle_since=T0, observed_until=T0 + minutes(59))

    uow = await _deliver(_rollup(59, util=1.0), store)

    assert uow.events == []
    assert store.idle["w1"] == IdleState(idle_since=T0, observed_until=T0 + minutes(59))


async def test_a_warning_from_a_delivery_that_fails_before_its_commit_is_not_kept() -> None:
    store = await _placed(kind="instance")
    before = IdleState(idle_since=T0, observed_until=T0 + minutes(59))
    store.idle["w1"] = before
    uow = FakeBillingUnitOfWork(allocations=store)
    event = _rollup(59, util=1.0)

    async with uow:
        await on_node_rollup(event, handler_context(event, uow=uow, deps=DEPS))
        assert store.actions != []  # the handler did warn, inside the delivery

    assert store.idle == {"w1": before}
    assert store.actions == []
    assert uow.committed == []
