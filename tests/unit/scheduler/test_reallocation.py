"""A started report with the devices the host gave moves the placement onto them (fake unit of work)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from libs.common.events.agent import WorkloadStartedV1
from libs.common.events.scheduler import WorkloadReallocatedV1, WorkloadRunningV1
from libs.common.testing import handler_context
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.service.handlers import SchedulerDeps, on_workload_started

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
DEPS = SchedulerDeps(half_life=timedelta(days=7))
MIG = [
    ("m1/mig/a", "1g.10gb", 1, "MIG-aaaa"),
    ("m1/mig/b", "1g.10gb", 1, "MIG-bbbb"),
    ("m1/mig/c", "2g.20gb", 2, "MIG-cccc"),
]


def _gpu(uuid: str, *, node: str = "n1", model: str = "A100-80GB", mig: bool = False) -> dict[str, Any]:
    parts = [
        {
            "partition_id": pid,
            "kind": "mig",
            "profile": prof,
            "units": units,
            "memory_bytes": units * (10 << 30),
            "device_uuid": device,
        }
        for pid, prof, units, device in (MIG if mig else [])
    ]
    return {
        "gpu_uuid": uuid,
        "node": node,
        "model": model,
        "memory_bytes": 80 << 30,
        "units": Decimal("8"),
        "health": "healthy",
        "labels": {},
        "mig_enabled": mig,
        "time_slice_ratio": 1,
        "partitions": parts,
    }


async def _fleet(uow: FakeSchedulerUnitOfWork) -> None:
    async with uow:
        for uuid in ("g1", "g2", "g3"):
            await uow.fleet.upsert_gpu(row=_gpu(uuid))
        await uow.fleet.upsert_gpu(row=_gpu("h1", model="H100-80GB"))
        await uow.fleet.upsert_gpu(row=_gpu("x1", node="n2"))
        await uow.fleet.upsert_gpu(row=_gpu("m1", mig=True))
        await uow.commit()


async def _placed(uow: FakeSchedulerUnitOfWork, wid: str, *slots: tuple[str, str]) -> str:
    """Workload ``wid`` of acme placed as ``p-<wid>`` on n1, holding these (gpu, slot)s."""
    pid = f"p-{wid}"
    workload: dict[str, Any] = {
        "workload_id": wid,
        "tenant_id": "acme",
        "kind": "job",
        "spec": {"gpus": len(slots)},
        "urgency": 0.5,
        "preemptible": False,
        "tags": {},
        "submitted_at": T0 - timedelta(hours=1),
        "priority": 0.5,
    }
    grants = [
        {"gpu": g, "node": "n1", "slot": s, "units": 8 if not s else 1, "kind": "mig" if s else "whole"}
        for g, s in slots
    ]
    placement: dict[str, Any] = {
        "placement_id": pid,
        "workload_id": wid,
        "tenant_id": "acme",
        "node": "n1",
        "grants": grants,
        "gpus": sum(1 for _g, s in slots if not s),
        "units_milli": sum(int(g["units"]) * 1000 for g in grants),
        "models": ["A100-80GB"],
        "priority": 0.5,
        "preemptible": False,
        "ends_at": None,
        "placed_at": T0 - timedelta(minutes=30),
    }
    async with uow:
        await uow.workloads.submit(row=workload, outbox=[])
        await uow.workloads.insert_placement(row=placement, slots=list(slots))
        await uow.workloads.set_state(wid, state="placed", placement_id=pid, priority=0.5)
        await uow.commit()
    return pid


async def _start(uow: FakeSchedulerUnitOfWork, wid: str, devices: list[str] | None) -> None:
    event = WorkloadStartedV1(
        workload_id=wid, tenant_id="acme", placement_id=f"p-{wid}", node="n1", gpu_uuids=devices
    )
    async with uow:
        await on_workload_started(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()


def _reallocations(uow: FakeSchedulerUnitOfWork) -> list[WorkloadReallocatedV1]:
    return [e for e in uow.events if isinstance(e, WorkloadReallocatedV1)]


def _held(uow: FakeSchedulerUnitOfWork, pid: str) -> list[tuple[str, str]]:
    return [(g["gpu"], g["slot"]) for g in uow.workloads.placements[pid].grants]


async def _setup(*placements: tuple[str, list[tuple[str, str]]]) -> FakeSchedulerUnitOfWork:
    uow = FakeSchedulerUnitOfWork()
    await _fleet(uow)
    for wid, slots in placements:
        await _placed(uow, wid, *slots)
    return uow


async def test_a_start_on_other_devices_moves_the_placement_onto_them_and_emits_reallocated() -> None:
    uow = await _setup(("w1", [("g1", "")]))

    await _start(uow, "w1", ["g2"])

    assert _held(uow, "p-w1") == [("g2", "")]
    assert uow.workloads.held == {("g2", ""): "p-w1"}
    running, moved = uow.events
    assert isinstance(running, WorkloadRunningV1)
    assert isinstance(moved, WorkloadReallocatedV1)
    assert (moved.placement_id, moved.node) == ("p-w1", "n1")
    assert [a.gpu_uuid for a in moved.allocations] == ["g2"]
    assert [a.gpu_uuid for a in moved.previous] == ["g1"]
    assert moved.allocations[0].units == moved.previous[0].units == Decimal("8")
    assert moved.allocations[0].model == "A100-80GB"
    assert uow.workloads.wakes >= 1


async def test_only_the_grants_whose_device_the_host_did_not_give_move() -> None:
    uow = await _setup(("w1", [("g1", ""), ("g2", "")]))

    await _start(uow, "w1", ["g3", "g2"])

    assert _held(uow, "p-w1") == [("g3", ""), ("g2", "")]
    (moved,) = _reallocations(uow)
    assert [a.gpu_uuid for a in moved.previous] == ["g1", "g2"]
    assert [a.gpu_uuid for a in moved.allocations] == ["g3", "g2"]


async def test_a_device_another_placement_held_is_swapped_so_every_slot_stays_held_once() -> None:
    uow = await _setup(("w1", [("g1", "")]), ("w2", [("g2", "")]))

    await _start(uow, "w1", ["g2"])

    assert _held(uow, "p-w1") == [("g2", "")]
    assert _held(uow, "p-w2") == [("g1", "")]
    assert uow.workloads.held == {("g2", ""): "p-w1", ("g1", ""): "p-w2"}
    mine, theirs = _reallocations(uow)
    assert (mine.placement_id, [a.gpu_uuid for a in mine.allocations]) == ("p-w1", ["g2"])
    assert (theirs.workload_id, theirs.placement_id) == ("w2", "p-w2")
    assert [a.gpu_uuid for a in theirs.previous] == ["g2"]
    assert [a.gpu_uuid for a in theirs.allocations] == ["g1"]
    assert "p-w1" in theirs.reason


async def test_a_mig_instance_moves_to_another_instance_of_its_profile() -> None:
    uow = await _setup(("w1", [("m1", "m1/mig/a")]))

    await _start(uow, "w1", ["m1/mig/b"])

    assert _held(uow, "p-w1") == [("m1", "m1/mig/b")]
    (moved,) = _reallocations(uow)
    assert (moved.allocations[0].partition_id, moved.allocations[0].profile) == ("m1/mig/b", "1g.10gb")


async def test_a_mig_instance_reported_by_its_mig_device_uuid_moves_onto_that_partition() -> None:
    uow = await _setup(("w1", [("m1", "m1/mig/a")]))

    await _start(uow, "w1", ["MIG-bbbb"])

    assert _held(uow, "p-w1") == [("m1", "m1/mig/b")]
    assert uow.workloads.held == {("m1", "m1/mig/b"): "p-w1"}
    (moved,) = _reallocations(uow)
    assert [a.partition_id for a in moved.previous] == ["m1/mig/a"]
    assert (moved.allocations[0].partition_id, moved.allocations[0].profile) == ("m1/mig/b", "1g.10gb")


async def test_a_mig_item_reported_by_its_own_mig_device_uuid_stays_as_placed() -> None:
    uow = await _setup(("w1", [("m1", "m1/mig/a")]))

    await _start(uow, "w1", ["MIG-aaaa"])

    assert _held(uow, "p-w1") == [("m1", "m1/mig/a")]
    assert _reallocations(uow) == []


async def test_a_mig_item_reported_by_its_gpu_stays_as_placed() -> None:
    uow = await _setup(("w1", [("m1", "m1/mig/a")]))

    await _start(uow, "w1", ["m1"])

    assert _held(uow, "p-w1") == [("m1", "m1/mig/a")]
    assert _reallocations(uow) == []


async def test_a_repeat_report_with_the_same_devices_changes_nothing() -> None:
    uow = await _setup(("w1", [("g1", "")]), ("w2", [("g2", "")]))
    await _start(uow, "w1", ["g2"])
    before = (dict(uow.workloads.held), len(uow.events))

    await _start(uow, "w1", ["g2"])

    assert (dict(uow.workloads.held), len(uow.events)) == before


async def test_a_start_as_placed_changes_no_grant() -> None:
    uow = await _setup(("w1", [("g1", "")]))

    await _start(uow, "w1", None)
    await _start(uow, "w1", ["g1"])

    assert _held(uow, "p-w1") == [("g1", "")]
    assert _reallocations(uow) == []


@pytest.mark.parametrize(
    ("slots", "devices", "why"),
    [
        ([("g1", "")], ["g2", "g3"], "reported 2 devices for 1 allocations"),
        ([("g1", "")], ["x1"], "device x1 is not a GPU of node n1"),
        ([("g1", "")], ["h1"], "device h1 is a H100-80GB, the allocation holds a A100-80GB"),
        ([("g1", "")], ["m1/mig/b"], "device m1/mig/b is a MIG instance, the allocation holds a whole GPU"),
        ([("m1", "m1/mig/a")], ["m1/mig/c"], "is MIG profile 2g.20gb, the allocation holds 1g.10gb"),
        ([("m1", "m1/mig/a")], ["MIG-4b1c"], "MIG device MIG-4b1c is not recorded as an instance of node n1"),
        (
            [("m1", "m1/mig/a")],
            ["MIG-cccc"],
            "device MIG-cccc is MIG profile 2g.20gb, the allocation holds 1g.10gb",
        ),
        ([("g1", ""), ("g2", "")], ["g3", "g3"], "device g3 is reported twice"),
    ],
)
async def test_a_report_that_cannot_be_followed_is_refused_and_changes_nothing(
    slots: list[tuple[str, str]], devices: list[str], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    uow = await _setup(("w1", slots), ("w2", [("g3", "")]))
    held = dict(uow.workloads.held)

    with caplog.at_level(logging.WARNING, logger="services.scheduler.service.handlers"):
        await _start(uow, "w1", devices)

    assert uow.workloads.held == held
    assert _held(uow, "p-w1") == slots
    assert _reallocations(uow) == []
    assert uow.workloads.workloads["w1"].state == "running"
    assert any(why in r.getMessage() and "p-w1 keeps its devices" in r.getMessage() for r in caplog.records)


async def test_a_report_about_an_old_placement_moves_nothing() -> None:
    uow = await _setup(("w1", [("g1", "")]))
    event = WorkloadStartedV1(
        workload_id="w1", tenant_id="acme", placement_id="p-old", node="n1", gpu_uuids=["g2"]
    )

    async with uow:
        await on_workload_started(event, handler_context(event, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert _held(uow, "p-w1") == [("g1", "")]
    assert uow.events == []
