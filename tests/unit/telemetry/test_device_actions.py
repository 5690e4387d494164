"""The agent's device actions (GPU reset, node reboot, MIG layouts) over the fake adapter and the
simulated fleet, publishing through the fake producer: no broker, no host."""

from __future__ import annotations

import dataclasses
import sys
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition

from libs.common.events import EVENT_TYPES, decode, encode, envelop, topics
from libs.common.events.agent import HostActionDoneV1, HostActionRequestedV1, NodeDiscoveredV1
from libs.common.events.inventory import GpuPartitionsChangedV1, PartitionInfo
from libs.common.events.scheduler import (
    AllocationItem,
    RunCheckpoint,
    RunSpec,
    WorkloadEndedV1,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
)
from services.telemetry.adapters.agent.publisher_fake import FakePublisher
from services.telemetry.adapters.devices import FakeDeviceActions
from services.telemetry.adapters.devices.sim import sim_profiles
from services.telemetry.adapters.sim import FaultKind, SimFleet
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.domain.devices import DeviceResult, MigInstance
from services.telemetry.domain.gpu_models import GIB, GPU_MODELS
from services.telemetry.domain.metrics import GpuLost
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.process import NodeAgent
from services.telemetry.service.agent.runner import RunnerReport, WorkloadRunner
from services.telemetry.service.agent.setup import nvidia_smi_actions, simulated_setup
from services.telemetry.settings import TelemetrySettings
from tests.unit.telemetry.test_agent_checkpoint import FakeConsumer
from tests.unit.telemetry.test_agent_runner_book import RecordingRunner
from tests.unit.telemetry.test_migrate_checkpoint import MovingRunner

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SETTINGS = TelemetrySettings(kafka_bootstrap_servers="kafka-test:9092", kafka_topic_prefix="u.")
AGENT_TOPIC = SETTINGS.topic(topics.NODE_AGENT)
NODE = "sim-node-0000"
H100 = sim_profiles(GPU_MODELS["H100"])


GPUS = [gpu_uuid(hostname=NODE, index=i) for i in range(8)]


async def _agent(
    *, devices: FakeDeviceActions | None = None, runner: WorkloadRunner | None = None
) -> tuple[NodeAgent, FakePublisher, SimFleet]:
    """An agent over the default simulated fleet (two 8-GPU H100 nodes): with `devices`, the fake;
    with `runner`, that runner instead of the simulator's."""
    out = FakePublisher(partitions=SETTINGS.kafka_partitions)
    out.open(bootstrap=SETTINGS.kafka_bootstrap_servers, client_id="unit")
    await out.start()
    setup = await simulated_setup(settings=SETTINGS, clock=lambda: T0)
    fleet = setup.fleet
    assert fleet is not None
    assert [g.uuid for g in setup.discoveries[NODE].gpus] == GPUS
    if devices is not None:
        setup = dataclasses.replace(setup, devices=devices)
    if runner is not None:
        setup = dataclasses.replace(setup, runner=runner)
    agent = NodeAgent(settings=SETTINGS, setup=setup, clock=lambda: T0, publisher=out)
    return agent, out, fleet


def _fake(**kwargs: Any) -> FakeDeviceActions:
    return FakeDeviceActions(profiles=dict.fromkeys(GPUS, H100), **kwargs)


def _place(agent: NodeAgent, gpu: str, *, workload: str = "w1") -> None:
    agent.book.apply(
        WorkloadPlacedV1(
            workload_id=workload,
            tenant_id="acme",
            placement_id=f"p-{workload}",
            node=NODE,
            allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
            kind="job",
            profile="interactive",
            duration_s=600.0,
        ),
        at=T0,
    )


def _reset(gpu: str | None, *, node: str = NODE) -> HostActionRequestedV1:
    return HostActionRequestedV1(
        command_id=f"inc-1/{'reset' if gpu else 'reboot'}",
        incident_id="inc-1",
        node=node,
        gpu_uuid=gpu,
        action="reset_gpu" if gpu else "reboot_node",
    )


def _layout(gpu: str, *profiles: str, mig: bool = True) -> GpuPartitionsChangedV1:
    return GpuPartitionsChangedV1(
        gpu_uuid=gpu,
        node=NODE,
        mig_enabled=mig,
        time_slice_ratio=1,
        partitions=[
            PartitionInfo(
                partition_id=f"mig-{n}", kind="mig", profile=p, slot=None, units=Decimal(1), memory_bytes=GIB
            )
            for n, p in enumerate(profiles)
        ],
    )


def _replay(agent: NodeAgent, *changes: GpuPartitionsChangedV1) -> list[str]:
    """Feed changes through the intake as history (as at start); their event ids."""
    tp = TopicPartition(SETTINGS.topic(topics.INVENTORY), 0)
    ids = []
    for offset, change in enumerate(changes):
        envelope = envelop(change, source="/gpucloud/inventory", event_id=str(uuid.uuid4()))
        agent.intake.apply(tp, offset=offset, raw=encode(envelope), live=False)
        ids.append(envelope.id)
    return ids


async def _caught_up(agent: NodeAgent) -> None:
    """The intake reads the (rest of the) history to its end, as catch_up at start does."""
    if not agent.intake.caught_up:
        await agent.intake.catch_up(FakeConsumer({TopicPartition(SETTINGS.topic(topics.INVENTORY), 0): []}))
    assert agent.intake.caught_up


def _live_reset(agent: NodeAgent, gpu: str) -> None:
    agent.intake.apply(
        TopicPartition(AGENT_TOPIC, 0),
        offset=0,
        raw=encode(envelop(_reset(gpu), source="/gpucloud/recovery")),
        live=True,
    )


async def _sent(agent: NodeAgent, out: FakePublisher) -> list[object]:
    """What the agent sent on its topic, after its next tick."""
    await agent.tick()
    return [decode(value, EVENT_TYPES)[1] for _, value in out.messages(AGENT_TOPIC)]


async def test_an_idle_gpu_is_reset_and_the_result_is_sent_with_the_next_tick() -> None:
    agent, out, _ = await _agent(devices=(fake := _fake()))

    done = await agent.devices.host_action(_reset(GPUS[0]))

    assert fake.carried_out == [("reset_gpu", GPUS[0])]
    assert (done.outcome, done.action, done.incident_id, done.command_id) == (
        "succeeded",
        "reset_gpu",
        "inc-1",
        "inc-1/reset",
    )
    assert done in await _sent(agent, out)


async def test_a_reset_of_a_gpu_a_workload_still_holds_is_refused_and_nothing_runs() -> None:
    agent, out, _ = await _agent(devices=(fake := _fake()))
    _place(agent, GPUS[0])

    done = await agent.devices.host_action(_reset(GPUS[0]))

    assert (done.outcome, done.reason, done.commands) == ("refused", "GPU busy: workload w1", [])
    assert fake.calls == []
    assert done in await _sent(agent, out)


async def test_a_failing_reset_is_sent_with_its_command_exit_status_and_output() -> None:
    failed = DeviceResult(
        outcome="failed",
        reason="nvidia-smi --gpu-reset exited 255",
        commands=(("nvidia-smi", "--gpu-reset", "-i", "GPU-x"),),
        exit_code=255,
        output="Unable to reset GPU\n",
    )
    agent, _, _ = await _agent(devices=_fake(fail={"reset_gpu": failed}))

    done = await agent.devices.host_action(_reset(GPUS[0]))

    assert (done.outcome, done.exit_code, done.output) == ("failed", 255, "Unable to reset GPU\n")
    assert done.commands == [["nvidia-smi", "--gpu-reset", "-i", "GPU-x"]]


async def test_a_node_is_rebooted_only_when_none_of_its_gpus_holds_a_workload() -> None:
    agent, _, _ = await _agent(devices=(fake := _fake()))
    _place(agent, GPUS[5], workload="w7")

    busy = await agent.devices.host_action(_reset(None))
    agent.book.apply(_ended("w7"), at=T0)
    done = await agent.devices.host_action(_reset(None))

    assert (busy.outcome, busy.reason) == ("refused", "GPU busy: workload w7")
    assert (done.outcome, done.gpu_uuid, fake.carried_out) == ("succeeded", None, [("reboot_node", NODE)])


async def test_a_reboot_on_a_host_without_a_reboot_command_is_refused_as_not_configured() -> None:
    agent, _, _ = await _agent(devices=_fake(reboot_configured=False))

    done = await agent.devices.host_action(_reset(None))

    assert done.outcome == "refused"
    assert "not configured" in done.reason


async def test_a_reset_of_a_gpu_not_on_the_node_is_refused() -> None:
    agent, _, _ = await _agent(devices=(fake := _fake()))

    done = await agent.devices.host_action(_reset("GPU-elsewhere"))

    assert (done.outcome, done.reason, fake.calls) == ("refused", f"no GPU GPU-elsewhere on {NODE}", [])


async def test_a_requested_action_for_another_agents_node_is_left_to_it() -> None:
    agent, out, _ = await _agent(devices=(fake := _fake()))

    agent.intake.apply(
        TopicPartition(AGENT_TOPIC, 0),
        offset=0,
        raw=encode(envelop(_reset("GPU-x", node="gpu-z-99"), source="/gpucloud/recovery")),
        live=True,
    )
    await agent.devices.settled()

    assert fake.calls == []
    assert [e for e in await _sent(agent, out) if isinstance(e, HostActionDoneV1)] == []


async def test_a_live_request_through_the_intake_is_carried_out_and_reported() -> None:
    agent, out, _ = await _agent(devices=(fake := _fake()))
    await _caught_up(agent)

    _live_reset(agent, GPUS[2])
    await agent.devices.settled()

    assert fake.carried_out == [("reset_gpu", GPUS[2])]
    done = [e for e in await _sent(agent, out) if isinstance(e, HostActionDoneV1)]
    assert [(d.gpu_uuid, d.outcome) for d in done] == [(GPUS[2], "succeeded")]


async def test_a_partitions_change_applies_the_mig_layout_and_announces_the_node_again() -> None:
    agent, out, _ = await _agent(devices=(fake := _fake()))

    [event_id] = _replay(agent, _layout(GPUS[0], "3g.40gb", "1g.10gb"))
    await _caught_up(agent)
    await agent.devices.settled()

    assert ("apply_mig", GPUS[0], ("1g.10gb", "3g.40gb")) in fake.calls
    sent = await _sent(agent, out)
    done = [e for e in sent if isinstance(e, HostActionDoneV1)]
    assert [(d.command_id, d.action, d.outcome, d.incident_id) for d in done] == [
        (event_id, "apply_mig", "succeeded", None)
    ]
    assert [e.node for e in sent if isinstance(e, NodeDiscoveredV1)] == [NODE]


async def test_a_replayed_change_whose_layout_the_gpu_has_is_a_no_op() -> None:
    have = (MigInstance("3g.40gb", 2), MigInstance("1g.10gb", 9))
    agent, out, _ = await _agent(devices=(fake := _fake(instances={GPUS[0]: have})))

    _replay(agent, _layout(GPUS[0], "1g.10gb", "3g.40gb"))
    await _caught_up(agent)
    await agent.devices.settled()

    assert [name for name, _, _ in fake.calls] == ["mig_instances"]
    assert [e for e in await _sent(agent, out) if isinstance(e, HostActionDoneV1)] == []


async def test_of_several_replayed_changes_only_the_latest_layout_is_applied() -> None:
    agent, _, _ = await _agent(devices=(fake := _fake()))

    _replay(agent, _layout(GPUS[0], "7g.80gb"), _layout(GPUS[0], "2g.20gb"), _layout(GPUS[0], "4g.40gb"))
    await _caught_up(agent)
    await agent.devices.settled()

    assert [(n, p) for n, _, p in fake.calls if n == "apply_mig"] == [("apply_mig", ("4g.40gb",))]


async def test_a_change_of_another_agents_gpu_is_not_acted_on() -> None:
    agent, _, _ = await _agent(devices=(fake := _fake()))

    _replay(agent, _layout("GPU-of-another-agent", "1g.10gb"))
    await _caught_up(agent)
    await agent.devices.settled()

    assert fake.calls == []


async def test_an_invalid_layout_is_refused_with_the_reason() -> None:
    agent, out, _ = await _agent(devices=(fake := _fake()))

    _replay(agent, _layout(GPUS[0], "3g.40gb", "3g.40gb", "3g.40gb"))
    await _caught_up(agent)
    await agent.devices.settled()

    done = [e for e in await _sent(agent, out) if isinstance(e, HostActionDoneV1)]
    assert [(d.outcome, d.reason) for d in done] == [
        ("refused", "3 instances of 3g.40gb asked, the GPU has room for 2")
    ]
    assert fake.carried_out == []


async def test_a_layout_change_on_a_busy_gpu_is_refused() -> None:
    agent, out, _ = await _agent(devices=(fake := _fake()))
    _place(agent, GPUS[3])
    change = _layout(GPUS[3], "7g.80gb")

    done = await _apply(agent, out, change)

    assert done is not None
    assert (done.outcome, done.reason) == ("refused", "GPU busy: workload w1")
    assert fake.carried_out == []


async def test_a_failed_mig_apply_is_reported_and_the_node_not_announced_again() -> None:
    failed = DeviceResult(outcome="failed", reason="Insufficient Resources", exit_code=2)
    agent, out, _ = await _agent(devices=_fake(fail={"apply_mig": failed}))

    done = await _apply(agent, out, _layout(GPUS[0], "7g.80gb"))

    assert done is not None
    assert (done.outcome, done.exit_code, done.reason) == ("failed", 2, "Insufficient Resources")
    assert not [e for e in await _sent(agent, out) if isinstance(e, NodeDiscoveredV1)]


async def test_a_change_without_mig_asks_for_no_device_action() -> None:
    agent, out, _ = await _agent(devices=(fake := _fake()))

    assert await _apply(agent, out, _layout(GPUS[0], mig=False)) is None
    assert fake.calls == []


async def test_on_the_simulated_fleet_a_new_layout_is_rediscovered_with_its_instances_and_uuids() -> None:
    agent, out, _ = await _agent()

    done = await _apply(agent, out, _layout(GPUS[1], "3g.40gb", "2g.20gb", "2g.20gb"))

    assert done is not None
    assert done.outcome == "succeeded"
    [node] = [e for e in await _sent(agent, out) if isinstance(e, NodeDiscoveredV1)]
    gpu = next(g for g in node.gpus if g.uuid == GPUS[1])
    assert gpu.mig_enabled
    assert [(m.profile, m.slot) for m in gpu.mig_instances] == [
        ("3g.40gb", 0),
        ("2g.20gb", 4),
        ("2g.20gb", 6),
    ]
    assert all(m.uuid and m.uuid.startswith("MIG-") for m in gpu.mig_instances)
    assert len({m.uuid for m in gpu.mig_instances}) == 3
    assert await _apply(agent, out, _layout(GPUS[1], "2g.20gb", "3g.40gb", "2g.20gb")) is None  # already so


async def test_on_the_simulated_fleet_a_reset_clears_an_xid_79_unless_it_survives_the_reset() -> None:
    agent, _, fleet = await _agent()
    fleet.inject_fault(gpu_uuid=GPUS[0], fault=FaultKind.XID, now=T0, xid=79)
    fleet.inject_fault(gpu_uuid=GPUS[1], fault=FaultKind.XID, now=T0, xid=79, survives_reset=True)

    for gpu in GPUS[:2]:
        assert (await agent.devices.host_action(_reset(gpu))).outcome == "succeeded"

    readings = fleet.sample_node(hostname=NODE, now=T0)
    assert not isinstance(readings[0], GpuLost)
    assert isinstance(readings[1], GpuLost)
    assert (await agent.devices.host_action(_reset(None))).outcome == "succeeded"
    assert isinstance(fleet.sample_node(hostname=NODE, now=T0)[1], GpuLost)  # a reboot neither


async def _apply(
    agent: NodeAgent, out: FakePublisher, change: GpuPartitionsChangedV1
) -> HostActionDoneV1 | None:
    """Apply one change through the intake; the HostActionDoneV1 it queued, if any."""
    before = len(out.in_flight)
    _replay(agent, change)
    await _caught_up(agent)
    await agent.devices.settled()
    queued = [decode(sent.value, EVENT_TYPES)[1] for sent in out.in_flight[before:]]
    done = [e for e in queued if isinstance(e, HostActionDoneV1)]
    return done[0] if done else None


def _ended(workload: str) -> WorkloadEndedV1:
    return WorkloadEndedV1(
        workload_id=workload, tenant_id="acme", placement_id=f"p-{workload}", outcome="completed"
    )


async def test_the_intake_reads_the_inventory_topic_for_partition_changes() -> None:
    agent, _, _ = await _agent()

    consumer = agent.intake.consumer()

    assert SETTINGS.topic(topics.INVENTORY) in consumer.subscription()


def test_an_empty_nvidia_smi_setting_is_refused_naming_the_setting() -> None:
    settings = TelemetrySettings(kafka_bootstrap_servers="kafka-test:9092", agent_nvidia_smi=" ")

    with pytest.raises(ValueError, match="TELEMETRY_AGENT_NVIDIA_SMI is empty"):
        nvidia_smi_actions(settings=settings)


async def test_the_reboot_command_setting_is_what_a_reboot_runs(tmp_path: Path) -> None:
    mark = tmp_path / "rebooted"
    script = tmp_path / "reboot.py"
    script.write_text(f"open({str(mark)!r}, 'w').write('yes')\n")
    settings = TelemetrySettings(
        kafka_bootstrap_servers="kafka-test:9092", agent_reboot_command=f"{sys.executable} {script}"
    )

    result = await nvidia_smi_actions(settings=settings).reboot_node(node=NODE)

    assert (result.outcome, result.commands) == ("succeeded", ((sys.executable, str(script)),))
    assert mark.read_text() == "yes"


async def test_layouts_replayed_at_start_wait_until_the_whole_history_is_read() -> None:
    agent, _, _ = await _agent(devices=(fake := _fake()))

    _replay(agent, _layout(GPUS[0], "7g.80gb"), _layout(GPUS[0], "4g.40gb"))
    await agent.devices.settled()
    assert fake.calls == []
    await _caught_up(agent)
    await agent.devices.settled()

    assert [(n, p) for n, _, p in fake.calls if n == "apply_mig"] == [("apply_mig", ("4g.40gb",))]


async def test_a_reset_asked_before_the_history_is_read_waits_for_the_whole_book() -> None:
    agent, _, _ = await _agent(devices=(fake := _fake()))

    _live_reset(agent, GPUS[2])
    await agent.devices.settled()
    assert fake.calls == []
    await _caught_up(agent)
    await agent.devices.settled()

    assert fake.carried_out == [("reset_gpu", GPUS[2])]


async def test_a_layout_refused_while_its_gpu_was_busy_is_applied_at_a_tick_once_the_gpu_is_free() -> None:
    agent, out, _ = await _agent(devices=(fake := _fake()))
    _place(agent, GPUS[3])
    [event_id] = _replay(agent, _layout(GPUS[3], "7g.80gb"))
    await _caught_up(agent)
    await agent.devices.settled()

    await agent.tick()  # still busy: kept, and not reported again
    await agent.devices.settled()
    agent.book.apply(_ended("w1"), at=T0)
    await agent.tick()
    await agent.devices.settled()

    done = [e for e in await _sent(agent, out) if isinstance(e, HostActionDoneV1)]
    assert [(d.command_id, d.outcome, d.reason) for d in done] == [
        (event_id, "refused", "GPU busy: workload w1"),
        (event_id, "succeeded", ""),
    ]
    assert fake.carried_out == [("apply_mig", GPUS[3])]


async def test_a_gpu_whose_workload_ended_but_has_not_exited_yet_is_not_reset() -> None:
    agent, _, _ = await _agent(devices=(fake := _fake()), runner=RecordingRunner())
    _place(agent, GPUS[0])
    agent.book.apply(_ended("w1"), at=T0)

    busy = await agent.devices.host_action(_reset(GPUS[0]))
    agent.book.told([RunnerReport("w1", "finished", T0, placement_id="p-w1")])
    done = await agent.devices.host_action(_reset(GPUS[0]))

    assert (busy.outcome, busy.reason) == ("refused", "GPU busy: workload w1")
    assert done.outcome == "succeeded"
    assert fake.carried_out == [("reset_gpu", GPUS[0])]


def test_the_book_holds_a_gpu_a_moved_workload_left_until_the_runners_last_report_of_the_move() -> None:
    book = PlacementBook(runner=MovingRunner(), gpus=frozenset({GPUS[0]}))
    run = RunSpec(command=["x"], checkpoint=RunCheckpoint(signal="SIGUSR1"))
    for event in (
        _placed_on("p1", GPUS[0], run=run),
        WorkloadMigratingV1(workload_id="w1", tenant_id="acme", from_placement_id="p1", to_placement_id="p2"),
        _placed_on("p2", "GPU-of-another-agent", run=run),
        WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id="p1", outcome="migrated"),
    ):
        book.apply(event, at=T0)

    assert GPUS[0] not in book.allocations()
    assert (book.holding(GPUS[0]), book.holders(GPUS[0])) == (True, frozenset({"w1"}))
    book.told([RunnerReport("w1", "progress", T0, "transfer", 100.0, placement_id="p1", last=True)])
    assert not book.holding(GPUS[0])


def _placed_on(placement: str, gpu: str, *, run: RunSpec) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id="w1",
        tenant_id="acme",
        placement_id=placement,
        node=NODE,
        allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="H100")],
        kind="job",
        run=run,
    )
