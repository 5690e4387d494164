"""One contract for allocations, lifecycle facts and idle state: FakeAllocationStore, AllocationStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

import asyncpg
import pytest

from services.billing.adapters.allocation_store import AllocationRow
from services.billing.adapters.allocation_store_fake import FakeAllocationStore
from services.billing.adapters.unit_of_work import PostgresBillingUnitOfWork
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.host_facts import HostFact, HostFactKind
from services.billing.domain.idle import IdleActionRecord, IdleState
from services.billing.domain.prices import PricingClass, ResourceKey
from services.billing.domain.rating import Allocation, EndReason, close
from services.billing.domain.reconciliation import FactKind, PlacementFact
from services.billing.service.unit_of_work import AllocationWrites
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)


class AllocationContract(AllocationWrites, Protocol):
    """What the handlers write, and the reads reconciliation makes of the same store."""

    async def all_allocations(self) -> list[AllocationRow]: ...

    async def facts(self) -> list[PlacementFact]: ...

    async def host_facts(self) -> list[HostFact]: ...


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[AllocationContract]
    actions: Callable[[], Awaitable[list[IdleActionRecord]]]  # by workload, stage and time


def fake_subject() -> Subject:
    fake = FakeAllocationStore()

    async def actions() -> list[IdleActionRecord]:
        return sorted(fake.actions, key=lambda r: (r.workload_id, r.stage, r.at))

    units = fake_units(FakeBillingUnitOfWork(allocations=fake), lambda uow: uow.allocations)
    return Subject(units=units, actions=actions)


def sql_subject(pool: asyncpg.Pool[Any]) -> Subject:
    async def actions() -> list[IdleActionRecord]:
        rows = await pool.fetch(
            "SELECT workload_id, tenant_id, stage, idle_hours, at FROM idle_actions "
            "ORDER BY workload_id, stage, at"
        )
        return [IdleActionRecord(**dict(r)) for r in rows]

    units = sql_units(pool, PostgresBillingUnitOfWork, lambda uow: uow.allocations)
    return Subject(units=units, actions=actions)


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "billing") as pool:
        yield sql_subject(pool)


def _allocation(
    allocation_id: str, workload_id: str = "w1", tenant_id: str = "acme", *, started_at: datetime = T0
) -> Allocation:
    return Allocation(
        allocation_id=allocation_id,
        workload_id=workload_id,
        tenant_id=tenant_id,
        project="vision",
        resource=ResourceKey(gpu_model="A100-80GB", mig_profile="1g.10gb"),
        pricing_class=PricingClass.SPOT,
        compute_units=Decimal("1.5"),
        gpus=Decimal(1),
        started_at=started_at,
        tags={"team": "cv"},
    )


def _row(allocation: Allocation, placement_id: str, kind: str = "job", **changes: Any) -> AllocationRow:
    row = AllocationRow(
        allocation=allocation,
        placement_id=placement_id,
        kind=kind,
        rated_until=allocation.started_at,
        open=True,
        running=False,
    )
    return replace(row, **changes)


async def _open(subject: Subject, workload_id: str, tenant_id: str, kind: str, *, run: bool = True) -> None:
    """A placement of two GPUs: two allocations of one workload, as metering opens (and starts) them."""
    async with subject.units() as store:
        for gpu in ("a", "b"):
            await store.open_allocation(
                allocation=_allocation(f"{workload_id}/{gpu}", workload_id, tenant_id),
                placement_id=f"p-{workload_id}",
                kind=kind,
            )
        if run:
            await store.start_placement(f"p-{workload_id}", at=T0)


async def test_an_open_workload_answers_its_tenant_and_kind_and_an_unknown_one_nothing(
    subject: Subject,
) -> None:
    await _open(subject, "w1", "acme", "instance")
    await _open(subject, "w2", "globex", "job")
    await _open(subject, "w3", "acme", "instance", run=False)

    async with subject.units() as store:
        assert await store.open_workload("w1") == ("acme", "instance")
        assert await store.open_workload("w2") == ("globex", "job")
        assert await store.open_workload("w3") is None, "held but not running yet"
        assert await store.open_workload("never-placed") is None


async def test_a_placement_starts_once_from_the_hosts_instant_and_only_while_open(subject: Subject) -> None:
    a, b = _allocation("p1/a"), _allocation("p1/b")
    later = T0 + timedelta(minutes=7)
    async with subject.units() as store:
        await store.open_allocation(allocation=a, placement_id="p1", kind="job")
        await store.open_allocation(allocation=b, placement_id="p1", kind="job")
        await store.open_allocation(allocation=_allocation("p2/a"), placement_id="p2", kind="job")
        await store.close(close(_allocation("p2/a"), at=T0, reason=EndReason.CANCELLED), rated_until=T0)
        assert await store.lock_due(before=later + timedelta(hours=1), limit=10) == []  # nothing runs

    async with subject.units() as store:
        assert await store.start_placement("p1", at=later) == ["p1/a", "p1/b"]
    async with subject.units() as store:
        assert await store.start_placement("p1", at=later + timedelta(minutes=1)) == []  # runs already
        assert await store.start_placement("p2", at=later) == []  # ended before it ran
        assert await store.start_placement("p-unknown", at=later) == []

    async with subject.units() as store:
        started = [replace(x, started_at=later) for x in (a, b)]
        assert await store.lock_placement("p1") == [
            _row(x, "p1", rated_until=later, running=True) for x in started
        ]
        due = await store.lock_due(before=later + timedelta(minutes=1), limit=10)
        assert [r.allocation.allocation_id for r in due] == ["p1/a", "p1/b"]


async def test_the_open_allocations_of_a_workload_are_those_of_every_placement_not_yet_closed(
    subject: Subject,
) -> None:
    async with subject.units() as store:
        for pid in ("p1", "p2", "p3"):
            await store.open_allocation(allocation=_allocation(f"{pid}/a"), placement_id=pid, kind="job")
        await store.open_allocation(
            allocation=_allocation("q1/a", workload_id="w2"), placement_id="q1", kind="job"
        )
        await store.start_placement("p1", at=T0)
        await store.close(close(_allocation("p3/a"), at=T0, reason=EndReason.MIGRATED), rated_until=T0)

    async with subject.units() as store:
        rows = await store.lock_open_of_workload("w1")
        assert [(r.placement_id, r.running) for r in rows] == [("p1", True), ("p2", False)]
        assert await store.lock_open_of_workload("w-unknown") == []


async def test_an_allocation_opens_once_unrated_and_a_placement_answers_its_allocations_by_id(
    subject: Subject,
) -> None:
    b, a = _allocation("p1/b"), _allocation("p1/a")
    async with subject.units() as store:
        assert await store.open_allocation(allocation=b, placement_id="p1", kind="job")
        assert await store.open_allocation(allocation=a, placement_id="p1", kind="job")
        assert await store.open_allocation(allocation=_allocation("p2/a"), placement_id="p2", kind="job")
    async with subject.units() as store:
        again = replace(a, project="other", started_at=T0 + timedelta(hours=1))
        assert not await store.open_allocation(allocation=again, placement_id="p9", kind="instance")

    async with subject.units() as store:
        assert await store.lock_placement("p1") == [_row(a, "p1"), _row(b, "p1")]
        assert await store.lock_placement("p-unknown") == []


async def test_a_closed_allocation_keeps_its_end_and_rating_and_no_longer_counts_as_open(
    subject: Subject,
) -> None:
    a = _allocation("p1/a")
    async with subject.units() as store:
        await store.open_allocation(allocation=a, placement_id="p1", kind="instance")
        await store.set_rated("p1/a", T0 + timedelta(minutes=5))
    ended = close(a, at=T0 + timedelta(minutes=3), reason=EndReason.PREEMPTED)
    async with subject.units() as store:
        await store.close(replace(ended, project="ignored"), rated_until=T0 + timedelta(minutes=3))

    async with subject.units() as store:
        closed = _row(ended, "p1", "instance", rated_until=T0 + timedelta(minutes=3), open=False)
        assert await store.all_allocations() == [closed]
        assert await store.open_workload("w1") is None


async def test_due_allocations_are_the_open_ones_rated_short_of_an_instant_least_rated_first(
    subject: Subject,
) -> None:
    starts = {
        "d": T0,
        "c": T0 + timedelta(minutes=2),
        "b": T0 + timedelta(minutes=1),
        "a": T0,
        "late": T0 + timedelta(minutes=9),
    }
    async with subject.units() as store:
        for name, start in starts.items():
            await store.open_allocation(
                allocation=_allocation(name, started_at=start), placement_id=f"p-{name}", kind="job"
            )
            await store.start_placement(f"p-{name}", at=start)
        await store.open_allocation(allocation=_allocation("held"), placement_id="p-held", kind="job")
        await store.close(close(_allocation("d"), at=T0, reason=EndReason.COMPLETED), rated_until=T0)

    async with subject.units() as store:
        due = await store.lock_due(before=T0 + timedelta(minutes=5), limit=10)
        assert [r.allocation.allocation_id for r in due] == ["a", "b", "c"]
        two = await store.lock_due(before=T0 + timedelta(minutes=5), limit=2)
        assert [r.allocation.allocation_id for r in two] == ["a", "b"]


async def test_a_fact_is_kept_once_per_placement_kind_and_event_in_arrival_order_and_the_first_end_wins(
    subject: Subject,
) -> None:
    later, earlier = T0 + timedelta(minutes=9), T0 + timedelta(minutes=4)
    async with subject.units() as store:
        assert await store.first_end("p1") is None
        await store.record_fact(event_id="e1", kind="placed", placement_id="p1", at=T0)
        await store.record_fact(
            event_id="e2", kind="ended", placement_id="p1", at=later, end_reason=EndReason.FAILED
        )
    async with subject.units() as store:
        await store.record_fact(event_id="e1", kind="placed", placement_id="p1", at=later)  # redelivered
        await store.record_fact(
            event_id="e3", kind="ended", placement_id="p1", at=earlier, end_reason=EndReason.COMPLETED
        )
        await store.record_fact(event_id="e1", kind="placed", placement_id="p2", at=T0)

    async with subject.units() as store:
        await store.record_fact(event_id="e4", kind="running", placement_id="p1", at=later)
        await store.record_fact(event_id="e5", kind="running", placement_id="p1", at=earlier)
    async with subject.units() as store:
        assert await store.first_end("p1") == (earlier, EndReason.COMPLETED)
        assert await store.first_end("p2") is None
        assert await store.first_running("p1") == earlier
        assert await store.first_running("p2") is None
        assert await store.facts() == [
            PlacementFact(kind=FactKind.PLACED, placement_id="p1", at=T0),
            PlacementFact(kind=FactKind.ENDED, placement_id="p1", at=later, end_reason=EndReason.FAILED),
            PlacementFact(kind=FactKind.ENDED, placement_id="p1", at=earlier, end_reason=EndReason.COMPLETED),
            PlacementFact(kind=FactKind.PLACED, placement_id="p2", at=T0),
            PlacementFact(kind=FactKind.RUNNING, placement_id="p1", at=later),
            PlacementFact(kind=FactKind.RUNNING, placement_id="p1", at=earlier),
        ]


def _host(kind: HostFactKind, placement_id: str, at: datetime, outcome: str | None = None) -> HostFact:
    return HostFact(
        kind=kind,
        workload_id="w1",
        tenant_id="acme",
        placement_id=placement_id,
        node="n1",
        at=at,
        outcome=outcome,
    )


async def test_a_host_fact_is_kept_once_per_placement_kind_and_instant_in_arrival_order(
    subject: Subject,
) -> None:
    ran, exited = _host(HostFactKind.RUNNING, "p1", T0), _host(HostFactKind.EXITED, "p1", T0, "failed")
    async with subject.units() as store:
        await store.record_host_fact(event_id="e1", fact=ran)
        await store.record_host_fact(event_id="e2", fact=exited)
    async with subject.units() as store:
        await store.record_host_fact(event_id="e3", fact=ran)  # re-sent by a restarted agent: a new id
        await store.record_host_fact(event_id="e4", fact=replace(ran, at=T0 + timedelta(seconds=1)))
        await store.record_host_fact(event_id="e1", fact=replace(ran, placement_id="p2"))

    async with subject.units() as store:
        assert await store.host_facts() == [
            ran,
            exited,
            replace(ran, at=T0 + timedelta(seconds=1)),
            replace(ran, placement_id="p2"),
        ]


async def test_a_workload_never_seen_has_the_empty_idle_state(subject: Subject) -> None:
    async with subject.units() as store:
        assert await store.idle_state("w1") == IdleState()


async def test_a_saved_idle_state_is_read_back_and_saving_again_replaces_every_field(
    subject: Subject,
) -> None:
    warned = IdleState(
        idle_since=T0,
        observed_until=T0 + timedelta(hours=72),
        warned_at=T0 + timedelta(hours=72, microseconds=5),
        release_requested_at=None,
    )
    async with subject.units() as store:
        await store.save_idle(workload_id="w1", tenant_id="acme", state=warned)
        await store.save_idle(workload_id="w2", tenant_id="acme", state=IdleState(idle_since=T0))
    async with subject.units() as store:
        assert await store.idle_state("w1") == warned
        assert await store.idle_state("w2") == IdleState(idle_since=T0)

    busy_again = IdleState(observed_until=T0 + timedelta(hours=73))
    async with subject.units() as store:
        await store.save_idle(workload_id="w1", tenant_id="acme", state=busy_again)
    async with subject.units() as store:
        assert await store.idle_state("w1") == busy_again, "cleared fields are cleared, not kept"
        assert await store.idle_state("w2") == IdleState(idle_since=T0)


async def test_an_idle_action_is_kept_once_per_workload_stage_and_time_with_its_first_figures(
    subject: Subject,
) -> None:
    at = T0 + timedelta(hours=72)
    async with subject.units() as store:
        await store.record_idle_action(
            workload_id="w1", tenant_id="acme", stage="warning", idle_hours=72.0, at=at
        )
    async with subject.units() as store:
        # A redelivered rollup: the same action again, even with other figures, is already there.
        await store.record_idle_action(
            workload_id="w1", tenant_id="other", stage="warning", idle_hours=99.0, at=at
        )
        later = at + timedelta(hours=24)
        await store.record_idle_action(
            workload_id="w1", tenant_id="acme", stage="warning", idle_hours=96.0, at=later
        )
        await store.record_idle_action(
            workload_id="w1", tenant_id="acme", stage="release", idle_hours=96.0, at=later
        )
        await store.record_idle_action(
            workload_id="w2", tenant_id="acme", stage="warning", idle_hours=72.5, at=at
        )

    assert await subject.actions() == [
        IdleActionRecord("w1", "acme", "release", 96.0, later),
        IdleActionRecord("w1", "acme", "warning", 72.0, at),
        IdleActionRecord("w1", "acme", "warning", 96.0, later),
        IdleActionRecord("w2", "acme", "warning", 72.5, at),
    ]


async def test_writes_of_a_unit_of_work_that_does_not_commit_are_not_kept(subject: Subject) -> None:
    a = _allocation("p1/a")
    async with subject.units() as store:
        await store.open_allocation(allocation=a, placement_id="p1", kind="instance")
        await store.save_idle(workload_id="w1", tenant_id="acme", state=IdleState(idle_since=T0))
    async with subject.units.rolled_back() as store:
        await store.open_allocation(allocation=_allocation("p2/a"), placement_id="p2", kind="job")
        await store.close(close(a, at=T0, reason=EndReason.FAILED), rated_until=T0)
        await store.record_fact(event_id="e1", kind="placed", placement_id="p2", at=T0)
        await store.save_idle(workload_id="w1", tenant_id="acme", state=IdleState())
        await store.record_idle_action(
            workload_id="w1", tenant_id="acme", stage="warning", idle_hours=1.0, at=T0
        )
        await store.start_placement("p1", at=T0)
        await store.record_host_fact(event_id="e2", fact=_host(HostFactKind.RUNNING, "p1", T0))

    async with subject.units() as store:
        assert await store.all_allocations() == [_row(a, "p1", "instance")]
        assert await store.facts() == []
        assert await store.host_facts() == []
        assert await store.idle_state("w1") == IdleState(idle_since=T0)
    assert await subject.actions() == []
