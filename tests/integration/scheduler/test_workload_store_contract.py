"""One contract for the workload statements of the unit of work: FakeWorkloadStore and WorkloadStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from libs.common.db.uow import OutboxRow, outbox_row
from libs.common.events.scheduler import WorkloadQueuedV1
from services.scheduler.adapters.postgres import WAKE_CHANNEL
from services.scheduler.adapters.unit_of_work import PostgresSchedulerUnitOfWork
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.adapters.workload_store_fake import UniqueViolation
from services.scheduler.domain.stored import RunEnd, RunStart, StoredPlacement, StoredWorkload
from services.scheduler.service.unit_of_work import FleetWrites, WorkloadWrites
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation, eventually

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
T1, T2, T3 = (T0 + timedelta(minutes=m) for m in (1, 2, 3))
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
#: Held slots: (gpu, slot) -> the placement holding it.
Held = dict[tuple[str, str], str]


@dataclass(frozen=True, slots=True)
class Subject:
    name: str
    units: Units[WorkloadWrites]
    #: The same units of work, handing out the fleet store (tenant usage lives there).
    fleet: Units[FleetWrites]
    held: Callable[[], Awaitable[Held]]
    outbox: Callable[[], Awaitable[list[OutboxRow]]]
    #: Wake-ups of the placer delivered so far, once at least ``at_least`` arrived.
    wakes: Callable[[int], Awaitable[int]]


def fake_subject() -> Subject:
    uow = FakeSchedulerUnitOfWork()

    async def held() -> Held:
        return dict(uow.workloads.held)

    async def outbox() -> list[OutboxRow]:
        return list(uow.workloads.outbox)

    async def wakes(at_least: int) -> int:
        return uow.workloads.wakes

    return Subject(
        name="fake",
        units=fake_units(uow, lambda u: u.workloads),
        fleet=fake_units(uow, lambda u: u.fleet),
        held=held,
        outbox=outbox,
        wakes=wakes,
    )


def sql_subject(pool: asyncpg.Pool[Any], woken: list[str]) -> Subject:
    async def held() -> Held:
        rows = await pool.fetch("SELECT gpu_uuid, slot, placement_id FROM held_slots")
        return {(r["gpu_uuid"], r["slot"]): r["placement_id"] for r in rows}

    async def outbox() -> list[OutboxRow]:
        rows = await pool.fetch(
            "SELECT event_id::text, topic, key, payload, traceparent FROM outbox ORDER BY seq"
        )
        return [(r["event_id"], r["topic"], r["key"], bytes(r["payload"]), r["traceparent"]) for r in rows]

    async def wakes(at_least: int) -> int:
        async def arrived() -> int | None:
            return len(woken) if len(woken) >= at_least else None

        return await eventually(arrived, timeout=5.0, what=f"{at_least} wake-ups of the placer")

    return Subject(
        name="postgres",
        units=sql_units(pool, PostgresSchedulerUnitOfWork, lambda u: u.workloads),
        fleet=sql_units(pool, PostgresSchedulerUnitOfWork, lambda u: u.fleet),
        held=held,
        outbox=outbox,
        wakes=wakes,
    )


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "scheduler") as pool, pool.acquire() as listener:
        schema = await listener.fetchval("SELECT current_schema()")
        woken: list[str] = []

        def on_wake(_conn: object, _pid: int, _channel: str, payload: str) -> None:
            if payload == schema:
                woken.append(payload)

        await listener.add_listener(WAKE_CHANNEL, on_wake)
        try:
            yield sql_subject(pool, woken)
        finally:
            await listener.remove_listener(WAKE_CHANNEL, on_wake)


def refused_by_a_unique_index() -> AbstractContextManager[pytest.ExceptionInfo[Exception]]:
    """A row a unique index refuses: the fake's UniqueViolation, asyncpg's UniqueViolationError."""
    return pytest.raises((UniqueViolation, asyncpg.UniqueViolationError))


def workload_row(wid: str, *, tenant: str = "acme", priority: float = 0.5) -> dict[str, Any]:
    return {
        "workload_id": wid,
        "tenant_id": tenant,
        "kind": "job",
        "spec": {"image": "pytorch:2.3", "gpus": 1, "command": ["python", "train.py"]},
        "urgency": 0.25,
        "preemptible": True,
        "tags": {"project": "vision"},
        "submitted_at": T0,
        "priority": priority,
        "traceparent": TRACE,
    }


def queued(wid: str, *, tenant: str = "acme", priority: float = 0.5) -> StoredWorkload:
    """The workload ``workload_row`` submits, as stored."""
    return StoredWorkload(
        workload_id=wid,
        tenant_id=tenant,
        kind="job",
        state="queued",
        spec={"image": "pytorch:2.3", "gpus": 1, "command": ["python", "train.py"]},
        urgency=0.25,
        preemptible=True,
        tags={"project": "vision"},
        submitted_at=T0,
        priority=priority,
        pinned_priority=None,
        avoid_gpus=[],
        wait_reason=None,
        position=None,
        estimated_start=None,
        placement_id=None,
        ended_at=None,
        outcome=None,
        reason="",
        traceparent=TRACE,
    )


def placement_row(pid: str, wid: str, *, tenant: str = "acme", priority: float = 0.75) -> dict[str, Any]:
    return {
        "placement_id": pid,
        "workload_id": wid,
        "tenant_id": tenant,
        "node": "n1",
        "grants": [{"gpu": "g1", "node": "n1", "slot": "0", "units": 8, "kind": "whole"}],
        "gpus": 1,
        "units_milli": 8000,
        "models": ["A100-80GB"],
        "priority": priority,
        "preemptible": True,
        "ends_at": T0 + timedelta(hours=4),
        "placed_at": T0,
    }


def live(pid: str, wid: str, *, tenant: str = "acme") -> StoredPlacement:
    """The placement ``placement_row`` records, as stored."""
    return StoredPlacement(
        placement_id=pid,
        workload_id=wid,
        tenant_id=tenant,
        node="n1",
        grants=[{"gpu": "g1", "node": "n1", "slot": "0", "units": 8, "kind": "whole"}],
        gpus=1,
        units_milli=8000,
        models=["A100-80GB"],
        priority=0.75,
        preemptible=True,
        ends_at=T0 + timedelta(hours=4),
        preempt_deadline=None,
        preempted_for=None,
        migrating=False,
        placed_at=T0,
        started_at=None,
        ended_at=None,
        outcome=None,
        quota_released=False,
    )


async def place(
    subject: Subject, wid: str, pid: str, *, slots: Sequence[tuple[str, str]] = (("g1", "0"),)
) -> None:
    """Submit ``wid`` and place it as ``pid`` on ``slots``, as the placer does."""
    async with subject.units() as store:
        await store.submit(row=workload_row(wid), outbox=[])
        await store.insert_placement(row=placement_row(pid, wid), slots=slots)
        await store.set_state(wid, state="placed", placement_id=pid, priority=0.75)


async def workload_of(subject: Subject, wid: str) -> StoredWorkload | None:
    async with subject.units() as store:
        return await store.lock_workload(wid)


async def placement_of(subject: Subject, pid: str) -> StoredPlacement | None:
    async with subject.units() as store:
        return await store.placement(pid)


async def test_a_submitted_workload_is_queued_with_its_outbox_rows_and_reads_back_as_submitted(
    subject: Subject,
) -> None:
    event = WorkloadQueuedV1(workload_id="w1", tenant_id="acme", position=1, priority=0.5)
    row = outbox_row(event, source="contract", tenant="acme")
    async with subject.units() as store:
        submitted = await store.submit(row=workload_row("w1"), outbox=[row])

    assert submitted == queued("w1")
    assert await workload_of(subject, "w1") == queued("w1")
    assert await workload_of(subject, "w-unknown") is None
    assert await subject.outbox() == [row]
    async with subject.units() as store:
        assert await store.count_waiting() == 1


async def test_a_second_workload_with_the_same_id_is_refused(subject: Subject) -> None:
    async with subject.units() as store:
        await store.submit(row=workload_row("w1"), outbox=[])
    with refused_by_a_unique_index():
        async with subject.units() as store:
            await store.submit(row=workload_row("w1", tenant="globex"), outbox=[])

    assert await workload_of(subject, "w1") == queued("w1")


async def test_a_placement_holds_its_slots_and_is_the_workloads_live_one(subject: Subject) -> None:
    await place(subject, "w1", "p1", slots=[("g1", "0"), ("g1", "1")])

    assert await placement_of(subject, "p1") == live("p1", "w1")
    assert await workload_of(subject, "w1") == replace(
        queued("w1"), state="placed", placement_id="p1", priority=0.75
    )
    assert await subject.held() == {("g1", "0"): "p1", ("g1", "1"): "p1"}
    async with subject.units() as store:
        assert await store.live_placement_of("w1") == "p1"
        assert await store.live_placement_of("w-unknown") is None
        assert await store.placement("p-unknown") is None


async def test_a_slot_held_twice_and_a_second_live_placement_of_a_workload_are_refused(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1")
    async with subject.units() as store:
        await store.submit(row=workload_row("w2"), outbox=[])

    with refused_by_a_unique_index():
        async with subject.units() as store:
            await store.insert_placement(row=placement_row("p2", "w2"), slots=[("g2", "0"), ("g1", "0")])
    with refused_by_a_unique_index():
        async with subject.units() as store:
            await store.insert_placement(row=placement_row("p3", "w1"), slots=[("g3", "0")])
    with refused_by_a_unique_index():
        async with subject.units() as store:
            await store.insert_placement(row=placement_row("p1", "w2"), slots=[("g4", "0")])

    assert await placement_of(subject, "p2") is None
    assert await placement_of(subject, "p3") is None
    assert await placement_of(subject, "p1") == live("p1", "w1")
    assert await subject.held() == {("g1", "0"): "p1"}

    async with subject.units() as store:  # once ended, the workload and the slot may be placed again
        await store.end_placement("p1", outcome="preempted", at=T1)
        await store.insert_placement(row=placement_row("p4", "w1"), slots=[("g1", "0")])
    assert await subject.held() == {("g1", "0"): "p4"}


async def test_a_run_starts_only_on_the_workloads_current_placement_while_it_is_placed(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1")

    async with subject.units() as store:
        assert await store.start_run("w1", placement_id="p-stale", at=T1) is None
        assert await store.start_run("w-unknown", placement_id="p1", at=T1) is None
    assert await workload_of(subject, "w1") == replace(
        queued("w1"), state="placed", placement_id="p1", priority=0.75
    )
    assert await placement_of(subject, "p1") == live("p1", "w1")

    async with subject.units() as store:
        assert await store.start_run("w1", placement_id="p1", at=T1) == RunStart("acme", TRACE)
    async with subject.units() as store:  # running already: a repeated report changes nothing
        assert await store.start_run("w1", placement_id="p1", at=T2) is None

    assert await workload_of(subject, "w1") == replace(
        queued("w1"), state="running", placement_id="p1", priority=0.75, host_notes=[]
    )  # a start without notes keeps none: [] (the API shows an empty list), not "unknown"
    assert await placement_of(subject, "p1") == replace(live("p1", "w1"), started_at=T1)


async def test_a_run_ends_with_its_outcome_frees_its_slots_and_answers_the_tenants_usage(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1")
    async with subject.fleet() as fleet:
        await fleet.set_usage("acme", value=3.5, as_of=T0)
    async with subject.units() as store:
        await store.start_run("w1", placement_id="p1", at=T1)

    async with subject.units() as store:
        assert await store.end_run("w1", placement_id="p-stale", outcome="failed", reason="", at=T2) is None
        ended = await store.end_run("w1", placement_id="p1", outcome="completed", reason="exit 0", at=T2)

    assert ended == RunEnd(
        tenant_id="acme",
        traceparent=TRACE,
        started_at=T1,
        placed_at=T0,
        units_milli=8000,
        decayed_unit_hours=3.5,
        as_of=T0,
    )
    assert await workload_of(subject, "w1") == replace(
        queued("w1"),
        state="completed",
        placement_id="p1",
        priority=0.75,
        outcome="completed",
        reason="exit 0",
        ended_at=T2,
        host_notes=[],
    )
    assert await placement_of(subject, "p1") == replace(
        live("p1", "w1"), started_at=T1, ended_at=T2, outcome="completed"
    )
    assert await subject.held() == {}
    async with subject.units() as store:  # ended: the same report again is stale
        assert await store.end_run("w1", placement_id="p1", outcome="failed", reason="", at=T3) is None
        assert await store.live_placement_of("w1") is None


async def test_a_run_that_never_started_ends_and_a_tenant_without_usage_answers_none(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1")

    async with subject.units() as store:
        ended = await store.end_run("w1", placement_id="p1", outcome="failed", reason="oom", at=T2)

    assert ended == RunEnd("acme", TRACE, None, T0, 8000, None, None)
    assert (await workload_of(subject, "w1")) == replace(
        queued("w1"),
        state="failed",
        placement_id="p1",
        priority=0.75,
        outcome="failed",
        reason="oom",
        ended_at=T2,
    )


async def test_a_migrating_workload_keeps_its_priority_and_frees_its_slots(subject: Subject) -> None:
    await place(subject, "w1", "p1")

    async with subject.units() as store:
        await store.start_migration("w1", priority=0.625, avoid_gpu="g1")
        await store.mark_migrating("p1")

    migrating = await workload_of(subject, "w1")
    assert migrating is not None
    assert replace(migrating, avoid_gpus=[]) == replace(
        queued("w1"), state="migrating", placement_id="p1", priority=0.75, pinned_priority=0.625
    )
    assert await placement_of(subject, "p1") == replace(live("p1", "w1"), migrating=True)
    assert await subject.held() == {}
    async with subject.units() as store:  # live until re-placed, and waiting again
        assert await store.live_placement_of("w1") == "p1"
        assert await store.count_waiting() == 1


async def test_a_migrating_workload_avoids_each_gpu_it_is_moved_away_from_once(subject: Subject) -> None:
    # The real store once passed the avoid list JSON-encoded to a jsonb parameter the pool's codec encodes
    # again: the row kept the text '["g1"]' instead of "g1", so the pass never avoided the GPU.
    await place(subject, "w1", "p1")

    async with subject.units() as store:
        await store.start_migration("w1", priority=0.75, avoid_gpu="g2")
    async with subject.units() as store:  # a second request
        await store.start_migration("w1", priority=0.75, avoid_gpu="g1")
        await store.start_migration("w1", priority=0.75, avoid_gpu="g2")

    migrating = await workload_of(subject, "w1")
    assert migrating is not None
    assert migrating.avoid_gpus == ["g1", "g2"]


async def test_leaving_a_migration_forgets_its_pinned_priority_and_the_gpus_it_avoided(
    subject: Subject,
) -> None:
    # Kept for life, they once made a later preemption's requeue hide its old GPU from the whole pass.
    await place(subject, "w1", "p1")
    await place(subject, "w2", "p2", slots=[("g2", "0")])
    async with subject.units() as store:
        for wid, pid in (("w1", "p1"), ("w2", "p2")):
            await store.start_migration(wid, priority=0.625, avoid_gpu="g1")
            await store.mark_migrating(pid)
        await store.set_state("w1", state="placed", placement_id="p9", priority=0.625)  # on its target
        await store.set_state("w2", state="queued", placement_id=None)  # put back in the queue

    after: list[tuple[str, str, str | None]] = [("w1", "placed", "p9"), ("w2", "queued", None)]
    for wid, state, on in after:
        row = await workload_of(subject, wid)
        assert row is not None
        assert (row.state, row.placement_id, row.pinned_priority, row.avoid_gpus) == (state, on, None, [])


async def test_a_preemption_is_scheduled_once_and_never_on_an_ended_placement(subject: Subject) -> None:
    await place(subject, "w1", "p1")
    await place(subject, "w2", "p2", slots=[("g2", "0")])
    deadline = T0 + timedelta(minutes=5)

    async with subject.units() as store:
        first = await store.schedule_preemption("p1", deadline=deadline, preempted_for="w9")
        again = await store.schedule_preemption("p1", deadline=T3, preempted_for="w8")
        await store.end_placement("p2", outcome="completed", at=T1)
        ended = await store.schedule_preemption("p2", deadline=deadline, preempted_for="w9")
        unknown = await store.schedule_preemption("p-unknown", deadline=deadline, preempted_for="w9")

    scheduled = replace(live("p1", "w1"), preempt_deadline=deadline, preempted_for="w9")
    assert (first, again, ended, unknown) == (scheduled, None, None, None)
    assert await placement_of(subject, "p1") == scheduled


async def test_ending_a_placement_frees_its_slots_and_ending_it_again_answers_none(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1")

    async with subject.units() as store:
        first = await store.end_placement("p1", outcome="migrated", at=T1, released=True)
    async with subject.units() as store:
        second = await store.end_placement("p1", outcome="cancelled", at=T2)
        unknown = await store.end_placement("p-unknown", outcome="cancelled", at=T2)

    done = replace(live("p1", "w1"), ended_at=T1, outcome="migrated", quota_released=True)
    assert (first, second, unknown) == (done, None, None)
    assert await placement_of(subject, "p1") == done
    assert await subject.held() == {}


async def test_a_state_change_keeps_the_priority_unless_given_and_an_end_keeps_the_placement(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1")

    async with subject.units() as store:
        await store.end_placement("p1", outcome="preempted", at=T1)
        await store.set_state("w1", state="queued", placement_id=None)
    assert await workload_of(subject, "w1") == replace(queued("w1"), priority=0.75)

    async with subject.units() as store:
        await store.set_state("w1", state="placed", placement_id="p9", priority=0.125)
        await store.end_workload("w1", state="cancelled", outcome="cancelled", reason="by caller", at=T2)
        await store.set_state("w-unknown", state="placed", placement_id="p1")
        await store.end_workload("w-unknown", state="failed", outcome="failed", reason="", at=T2)
    assert await workload_of(subject, "w1") == replace(
        queued("w1"),
        state="cancelled",
        placement_id="p9",
        priority=0.125,
        outcome="cancelled",
        reason="by caller",
        ended_at=T2,
    )
    assert await workload_of(subject, "w-unknown") is None


async def test_the_queue_counts_queued_and_migrating_workloads_only(subject: Subject) -> None:
    async with subject.units() as store:
        for wid in ("w1", "w2", "w3", "w4"):
            await store.submit(row=workload_row(wid), outbox=[])
        await store.set_state("w2", state="placed", placement_id="p2")
        await store.start_migration("w3", priority=0.5, avoid_gpu="g1")
        await store.end_workload("w4", state="cancelled", outcome="cancelled", reason="", at=T1)
        assert await store.count_waiting() == 2


async def test_writes_of_a_unit_of_work_that_does_not_commit_are_not_kept(subject: Subject) -> None:
    await place(subject, "w1", "p1")
    before_w1, before_p1 = await workload_of(subject, "w1"), await placement_of(subject, "p1")

    async with subject.units.rolled_back() as store:
        await store.submit(row=workload_row("w2"), outbox=[])
        await store.insert_placement(row=placement_row("p2", "w2"), slots=[("g2", "0")])
        await store.start_run("w1", placement_id="p1", at=T1)
        await store.end_run("w1", placement_id="p1", outcome="completed", reason="", at=T2)
        await store.schedule_preemption("p2", deadline=T3, preempted_for="w9")

    assert await workload_of(subject, "w2") is None
    assert await placement_of(subject, "p2") is None
    assert await workload_of(subject, "w1") == before_w1
    assert await placement_of(subject, "p1") == before_p1
    assert await subject.held() == {("g1", "0"): "p1"}


async def test_the_placer_is_woken_by_committed_submissions_and_exits_and_not_by_rolled_back_ones(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1")  # the submission wakes it
    assert await subject.wakes(1) == 1

    async with subject.units.rolled_back() as store:
        await store.wake_placer()
        await store.end_run("w1", placement_id="p1", outcome="completed", reason="", at=T1)
    async with subject.units() as store:
        await store.end_run("w1", placement_id="p1", outcome="completed", reason="", at=T1)
        await store.wake_placer()  # one transaction's identical NOTIFYs arrive once
    assert await subject.wakes(2) == 2

    async with subject.units() as store:
        await store.wake_placer()
    assert await subject.wakes(3) == 3


def _grant(gpu: str, slot: str = "") -> dict[str, Any]:
    return {"gpu": gpu, "node": "n1", "slot": slot, "units": 8, "kind": "whole"}


async def test_placements_swap_their_slots_and_a_nodes_live_placements_leave_out_migrating_ones(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1", slots=[("g1", "")])
    await place(subject, "w2", "p2", slots=[("g2", "")])
    await place(subject, "w3", "p3", slots=[("g3", "")])
    async with subject.units() as store:
        await store.mark_migrating("p3")

    async with subject.units() as store:
        await store.regrant({"p1": [_grant("g2")], "p2": [_grant("g1")]})

    assert await subject.held() == {("g2", ""): "p1", ("g1", ""): "p2"}
    assert await placement_of(subject, "p1") == replace(live("p1", "w1"), grants=[_grant("g2")])
    async with subject.units() as store:
        assert [p.placement_id for p in await store.live_placements_on("n1")] == ["p1", "p2"]
        assert await store.live_placements_on("n-unknown") == []


async def test_a_regrant_onto_a_slot_another_placement_keeps_is_refused(subject: Subject) -> None:
    await place(subject, "w1", "p1", slots=[("g1", "")])
    await place(subject, "w2", "p2", slots=[("g2", "")])

    with refused_by_a_unique_index():
        async with subject.units() as store:
            await store.regrant({"p1": [_grant("g2")]})

    assert await subject.held() == {("g1", ""): "p1", ("g2", ""): "p2"}
    assert await placement_of(subject, "p1") == live("p1", "w1")
