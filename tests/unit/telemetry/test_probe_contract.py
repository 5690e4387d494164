"""One contract for every GpuProbe: the fake, the simulator and (where a driver exists) NVML."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pynvml
import pytest

from services.telemetry.adapters.nvml_probe import NvmlProbe
from services.telemetry.adapters.probe_fake import FakeProbe
from services.telemetry.adapters.sim import FaultKind, FleetSpec, SimFleet, SimProbe
from services.telemetry.domain.metrics import GpuLost, GpuSample, XidEvent
from services.telemetry.domain.probe import GpuProbe
from tests.unit.telemetry.conftest import T0, at


@dataclass
class Subject:
    probe: GpuProbe
    lose_gpu: Callable[[str], None] | None  # how to make a GPU fall off the bus, where we can
    raise_xid: Callable[[str, int], None] | None


def fake_subject() -> Subject:
    fake = FakeProbe()
    return Subject(
        probe=fake,
        lose_gpu=lambda uuid: fake.lose_gpu(gpu_uuid=uuid),
        raise_xid=lambda uuid, xid: fake.push_xid(gpu_uuid=uuid, xid=xid),
    )


def sim_subject() -> Subject:
    fleet = SimFleet(spec=FleetSpec.uniform(nodes=1, model="A100-80GB", gpus_per_node=2), start=T0)
    ticks = iter(range(1, 10_000))
    probe = SimProbe(fleet=fleet, hostname="sim-node-0000", clock=lambda: at(next(ticks)))
    return Subject(
        probe=probe,
        lose_gpu=lambda uuid: fleet.inject_fault(gpu_uuid=uuid, fault=FaultKind.FALL_OFF_BUS, now=at(0)),
        raise_xid=lambda uuid, xid: fleet.inject_fault(
            gpu_uuid=uuid, fault=FaultKind.XID, now=at(0), xid=xid
        ),
    )


def nvml_subject() -> Subject:
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        pytest.skip(f"NVML cannot initialise here: {exc}")
    return Subject(probe=NvmlProbe(xid_wait_ms=10), lose_gpu=None, raise_xid=None)


@pytest.fixture(params=[fake_subject, sim_subject, nvml_subject], ids=["fake", "sim", "nvml"])
async def subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    made: Subject = request.param()
    yield made
    await made.probe.close()


async def test_the_probe_satisfies_the_protocol(subject: Subject) -> None:
    assert isinstance(subject.probe, GpuProbe)


async def test_discovery_lists_gpus_with_unique_uuids_in_index_order(subject: Subject) -> None:
    node = await subject.probe.discover()
    assert node.hostname
    assert node.gpus
    assert [g.index for g in node.gpus] == sorted(g.index for g in node.gpus)
    assert len({g.uuid for g in node.gpus}) == len(node.gpus)


async def test_a_sample_has_one_plausible_reading_per_discovered_gpu(subject: Subject) -> None:
    node = await subject.probe.discover()
    readings = await subject.probe.sample()
    assert [(r.gpu_uuid, r.index, r.node) for r in readings] == [
        (g.uuid, g.index, node.hostname) for g in node.gpus
    ]
    for reading in readings:
        assert isinstance(reading, GpuSample)
        assert reading.timestamp.tzinfo is not None
        if reading.fb_used_bytes is not None and reading.fb_total_bytes is not None:
            assert reading.fb_used_bytes <= reading.fb_total_bytes
        if reading.power_w is not None and reading.power_limit_w is not None:
            assert reading.power_w <= reading.power_limit_w * 1.1  # brief overshoot is real on hardware


async def test_polling_xids_returns_events_once(subject: Subject) -> None:
    node = await subject.probe.discover()
    assert await subject.probe.poll_xids() == []
    if subject.raise_xid is None:
        return  # a real driver raises XIDs only when hardware misbehaves
    subject.raise_xid(node.gpus[0].uuid, 13)
    events = await subject.probe.poll_xids()
    assert [(e.gpu_uuid, e.xid, e.node) for e in events] == [(node.gpus[0].uuid, 13, node.hostname)]
    assert all(isinstance(e, XidEvent) for e in events)
    assert await subject.probe.poll_xids() == []


async def test_a_lost_gpu_is_a_reading_and_the_others_keep_sampling(subject: Subject) -> None:
    if subject.lose_gpu is None:
        pytest.skip("cannot make a real GPU fall off the bus")
    node = await subject.probe.discover()
    subject.lose_gpu(node.gpus[0].uuid)
    first, *rest = await subject.probe.sample()
    assert isinstance(first, GpuLost)
    assert first.reason
    assert all(isinstance(r, GpuSample) for r in rest)


async def test_closing_twice_is_harmless(subject: Subject) -> None:
    await subject.probe.discover()
    await subject.probe.close()
    await subject.probe.close()
