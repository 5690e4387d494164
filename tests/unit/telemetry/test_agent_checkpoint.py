"""The agent's checkpoint: what it keeps, that re-applying it equals the full history, and refusals."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pytest
from aiokafka import TopicPartition

from libs.common.events import EVENT_TYPES, Event, decode, encode, envelop, topics
from libs.common.events.agent import SimFaultRequestedV1
from libs.common.events.scheduler import (
    AllocationItem,
    WorkloadEndedV1,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
)
from services.telemetry.adapters.agent import checkpoint as ck
from services.telemetry.adapters.agent import intake as intake_module
from services.telemetry.adapters.agent.intake import Command, Intake
from services.telemetry.adapters.fleetfile import parse_fleet
from services.telemetry.adapters.sim import SimFleet
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.runner import SimWorkloadRunner
from services.telemetry.settings import TelemetrySettings

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
FLEET = "nodes: [{hostname: gpu-a-01, gpus: [{model: H100-80GB-SXM, count: 4}]}]"
PREFIX = "ck."
SCHED = TopicPartition(PREFIX + topics.SCHEDULER, 0)
CMDS = TopicPartition(PREFIX + topics.NODE_AGENT, 0)
GPUS = [gpu_uuid(hostname="gpu-a-01", index=i) for i in range(4)]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _settings(state_dir: Path | None = None, *, prefix: str = PREFIX) -> TelemetrySettings:
    return TelemetrySettings(
        kafka_bootstrap_servers="kafka-test:9092", kafka_topic_prefix=prefix, agent_state_dir=state_dir
    )


@dataclass
class Agent:
    """The agent's reading side over a fresh simulated fleet, and the commands it ran."""

    book: PlacementBook
    intake: Intake
    commands: list[Command]


def _agent(state_dir: Path | None = None) -> Agent:
    fleet = SimFleet(spec=parse_fleet(FLEET), start=T0)
    book = PlacementBook(runner=SimWorkloadRunner(fleet=fleet), gpus=frozenset(GPUS))
    commands: list[Command] = []
    intake = Intake(settings=_settings(state_dir), book=book, gpus=frozenset(GPUS), command=commands.append)
    return Agent(book, intake, commands)


def _placed(
    workload: str,
    gpus: Sequence[str],
    placement: str,
    *,
    duration_s: float | None = None,
    node: str = "gpu-a-01",
) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id=workload,
        tenant_id="acme",
        placement_id=placement,
        node=node,
        allocations=[AllocationItem(gpu_uuid=g, units=Decimal(8), model="H100") for g in gpus],
        kind="job" if duration_s else "instance",
        profile="interactive",
        duration_s=duration_s,
    )


def _ended(
    workload: str, placement: str, outcome: Literal["cancelled", "migrated", "completed"] = "cancelled"
) -> WorkloadEndedV1:
    return WorkloadEndedV1(workload_id=workload, tenant_id="acme", placement_id=placement, outcome=outcome)


def _moving(workload: str, source: str, target: str) -> WorkloadMigratingV1:
    return WorkloadMigratingV1(
        workload_id=workload, tenant_id="acme", from_placement_id=source, to_placement_id=target
    )


def _raw(events: Iterable[tuple[float, Event]]) -> list[bytes]:
    return [encode(envelop(e, source="test", time=at(s))) for s, e in events]


HISTORY = _raw(
    [
        (0, _placed("w-job", GPUS[:1], "p1", duration_s=60.0)),  # still running at the checkpoint
        (1, _placed("w-gone", GPUS[1:2], "p2")),
        (2, _placed("w-elsewhere", ["GPU-other-0"], "p3", node="gpu-z-09")),
        (3, _ended("w-gone", "p2")),
        (4, _placed("w-svc", GPUS[1:2], "p4")),
        (10, _placed("w-arrives", GPUS[2:3], "p7", duration_s=300.0)),
        (20, _moving("w-svc", "p4", "p5")),
        (20, _placed("w-svc", GPUS[3:4], "p5")),
        (20, _ended("w-svc", "p4", "migrated")),
        (21, _moving("w-elsewhere", "p3", "p6")),  # a move between two other nodes
        (21, _placed("w-elsewhere", ["GPU-other-1"], "p6", node="gpu-z-10")),
    ]
)


def _apply(agent: Agent, records: Sequence[bytes], *, first_offset: int = 0) -> None:
    for offset, raw in enumerate(records, start=first_offset):
        agent.intake.apply(SCHED, offset=offset, raw=raw, live=False)


def _kinds(records: Iterable[bytes]) -> list[tuple[str, str]]:
    """(workload, event type) of each record."""
    decoded = [decode(r, EVENT_TYPES)[1] for r in records]
    return [(getattr(e, "workload_id", ""), e.event_type().split(".")[-2]) for e in decoded]


def _reports(book: PlacementBook, seconds: range) -> list[tuple[str, ...]]:
    """The book's reports, second by second, as comparable tuples."""
    out = []
    for s in seconds:
        for r in book.reports(now=at(s)):
            fields = r.model_dump(exclude={"type"})
            out.append((str(s), type(r).__name__, *(str(fields[k]) for k in sorted(fields))))
    return out


def test_the_checkpoint_keeps_exactly_the_records_of_workloads_still_held_in_consumption_order() -> None:
    agent = _agent()
    _apply(agent, HISTORY)
    kept = agent.intake.snapshot()
    assert _kinds(kept.records) == [
        ("w-job", "placed"),
        ("w-svc", "placed"),
        ("w-arrives", "placed"),
        ("w-svc", "migrating"),
        ("w-svc", "placed"),
        ("w-svc", "ended"),
    ]
    assert kept.positions == {SCHED: ck.Position(len(HISTORY), ck.fingerprint(HISTORY[-1]))}
    assert not agent.book.holds("w-elsewhere")  # other nodes' moves leave no pending migration behind
    assert not agent.book.holds("w-gone")


def test_a_job_that_finished_is_forgotten_once_the_book_lets_it_go() -> None:
    agent = _agent()
    _apply(agent, HISTORY)
    exits = [r for r in _reports(agent.book, range(0, 120)) if r[1] == "WorkloadExitedV1"]
    assert len(exits) == 1
    assert "w-job" in exits[0]
    assert {w for w, _ in _kinds(agent.intake.snapshot().records)} == {"w-svc", "w-arrives"}


def test_reapplying_the_checkpoint_gives_the_same_book_and_reports_as_the_full_history() -> None:
    live = _agent()
    _apply(live, HISTORY)
    _reports(live.book, range(0, 25))  # the agent ticked meanwhile; the checkpoint is taken at 25 s
    saved = ck.encode_checkpoint(live.intake.snapshot())
    full, resumed = _agent(), _agent()
    _apply(full, HISTORY)
    resumed.intake.restore(ck.decode_checkpoint(saved, expect=_origin()))
    assert (
        resumed.book.allocations()
        == full.book.allocations()
        == {
            GPUS[0]: ("w-job", "acme"),
            GPUS[2]: ("w-arrives", "acme"),
            GPUS[3]: ("w-svc", "acme"),
        }
    )
    full_reports = _reports(full.book, range(25, 400))
    assert _reports(resumed.book, range(25, 400)) == full_reports
    exits = [r for r in full_reports if r[1] == "WorkloadExitedV1"]
    assert len(exits) == 2  # w-job by its 60 s and w-arrives by its 300 s, at the same second in both
    assert resumed.book.allocations() == full.book.allocations() == {GPUS[3]: ("w-svc", "acme")}


def test_records_kept_before_a_workload_left_are_not_replayed_when_it_comes_back() -> None:
    agent = _agent()
    _apply(agent, _raw([(0, _placed("w1", GPUS[:1], "p1", duration_s=5.0))]))
    _reports(agent.book, range(0, 60))  # it finishes by itself: no scheduler record says so
    _apply(agent, _raw([(70, _placed("w1", GPUS[1:2], "p2"))]), first_offset=1)
    assert _kinds(agent.intake.snapshot().records) == [("w1", "placed")]
    assert decode(agent.intake.snapshot().records[0], EVENT_TYPES)[1].model_dump()["placement_id"] == "p2"


def _origin(prefix: str = PREFIX, gpus: Iterable[str] = GPUS) -> ck.Origin:
    return ck.Origin.of(bootstrap="kafka-test:9092", topic_prefix=prefix, gpus=gpus)


def _document(**changes: Any) -> bytes:
    agent = _agent()
    _apply(agent, HISTORY[:2])
    doc = json.loads(ck.encode_checkpoint(agent.intake.snapshot()))
    return json.dumps(doc | changes).encode()


@pytest.mark.parametrize(
    ("data", "expect", "reason"),
    [
        (b'{"version": 1, "bootstr', _origin(), "unreadable"),
        (b"[1, 2]", _origin(), "not a JSON object"),
        (_document(version=2), _origin(), "version 2, this agent writes 1"),
        (_document(), _origin(prefix="prod."), "topic prefix 'ck.'"),
        (_document(), _origin(gpus=GPUS[:2]), "another set of GPUs"),
        (_document(records=["not base64!"]), _origin(), "unreadable"),
        (
            _document(positions=[{"topic": SCHED.topic, "partition": 0, "next": -1, "tail": None}]),
            _origin(),
            "offset",
        ),
        (_document(positions=[{"topic": SCHED.topic}]), _origin(), "unreadable: KeyError"),
    ],
)
def test_a_broken_or_foreign_checkpoint_is_refused_with_its_reason(
    data: bytes, expect: ck.Origin, reason: str
) -> None:
    with pytest.raises(ck.CheckpointRefused, match=reason):
        ck.decode_checkpoint(data, expect=expect)


def test_a_checkpoint_reads_back_as_written() -> None:
    agent = _agent()
    _apply(agent, HISTORY)
    written = agent.intake.snapshot()
    assert ck.decode_checkpoint(ck.encode_checkpoint(written), expect=_origin()) == written


def test_the_atomic_writer_replaces_the_whole_file_or_leaves_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "agent" / "checkpoint.json"
    ck.write_atomically(path, b"first" * 1000)
    ck.write_atomically(path, b"second")
    assert path.read_bytes() == b"second"

    def power_cut(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", power_cut)
    with pytest.raises(OSError, match="disk gone"):
        ck.write_atomically(path, b"third, never whole")
    assert path.read_bytes() == b"second"
    assert [p.name for p in path.parent.iterdir()] == ["checkpoint.json"]


def test_a_missing_checkpoint_is_no_checkpoint_and_an_unreadable_one_is_refused(tmp_path: Path) -> None:
    assert ck.load_checkpoint(tmp_path / "none.json", expect=_origin()) is None
    with pytest.raises(ck.CheckpointRefused, match="cannot read"):
        ck.load_checkpoint(tmp_path, expect=_origin())  # a directory


@dataclass(frozen=True)
class Rec:
    offset: int
    value: bytes


class FakeConsumer:
    """Enough of AIOKafkaConsumer for the intake: every partition assigned, records in lists."""

    def __init__(
        self, logs: dict[TopicPartition, list[bytes]], *, begins: dict[TopicPartition, int] | None = None
    ):
        self.logs = logs
        self.begins = begins or dict.fromkeys(logs, 0)
        self.positions: dict[TopicPartition, int] = dict(self.begins)
        self.silent_fetches = 0  # fetches that answer nothing yet (a slow broker)
        # Apache Kafka answers a fetch past the end with OFFSET_OUT_OF_RANGE and the consumer
        # (auto_offset_reset=earliest) starts over; the embedded broker answers nothing.
        self.resets_past_the_end = False
        self.listed_short_by = 0  # end_offsets short of the end, as the embedded broker answers

    def assignment(self) -> set[TopicPartition]:
        return set(self.logs)

    async def beginning_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.begins[tp] for tp in tps}

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: max(0, len(self.logs[tp]) - self.listed_short_by) for tp in tps}

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    def highwater(self, tp: TopicPartition) -> int:
        return len(self.logs[tp])

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps or tuple(self.logs):
            self.positions[tp] = self.begins[tp]

    async def getmany(self, *tps: TopicPartition, timeout_ms: int = 0, max_records: int | None = None) -> Any:
        if self.silent_fetches:
            self.silent_fetches -= 1
            return {}
        out = {}
        for tp in tps or tuple(self.logs):
            if self.resets_past_the_end and self.positions[tp] > len(self.logs[tp]):
                self.positions[tp] = self.begins[tp]
            start = self.positions[tp]
            if start < len(self.logs[tp]):
                out[tp] = [Rec(o, v) for o, v in enumerate(self.logs[tp][start:], start=start)]
                self.positions[tp] = len(self.logs[tp])
        return out


def _command(command_id: str) -> bytes:
    event = SimFaultRequestedV1(command_id=command_id, gpu_uuid=GPUS[0], fault="xid", xid=79)
    return encode(envelop(event, source="test"))


LATER = _raw(
    [
        (30, _placed("w-other-node", ["GPU-other-2"], "p8", node="gpu-z-11")),
        (31, _ended("w-svc", "p5", "completed")),
        (32, _placed("w-new", GPUS[1:2], "p9")),
    ]
)


async def _started(agent: Agent, consumer: FakeConsumer) -> None:
    await agent.intake.catch_up(consumer)


async def test_a_restart_resumes_after_the_checkpoint_and_ends_with_the_full_replays_book(
    tmp_path: Path,
) -> None:
    first = _agent(tmp_path)
    logs = {SCHED: list(HISTORY), CMDS: [_command("old")]}
    await _started(first, FakeConsumer(logs))
    await first.intake.save(force=True)
    logs[SCHED] += LATER
    logs[CMDS].append(_command("while-down"))

    again, full = _agent(tmp_path), _agent()
    await _started(again, FakeConsumer(logs))
    await _started(full, FakeConsumer(logs))
    assert again.intake.refused is None
    assert again.intake.restored == 6
    assert again.intake.first_offsets == {SCHED: len(HISTORY), CMDS: 1}  # nothing before the checkpoint
    assert full.intake.first_offsets == {SCHED: 0, CMDS: 0}
    assert (
        again.book.allocations()
        == full.book.allocations()
        == {
            GPUS[0]: ("w-job", "acme"),
            GPUS[1]: ("w-new", "acme"),
            GPUS[2]: ("w-arrives", "acme"),
        }
    )
    assert again.commands == full.commands == []  # commands from before the start are history


@pytest.mark.parametrize(
    ("recreated", "resets", "reason"),
    [
        ({SCHED: HISTORY[:3], CMDS: []}, False, r"position \d+ is outside \[0, \d\]"),
        ({SCHED: HISTORY[:3], CMDS: []}, True, r"position \d+ is outside \[0, \d\]"),
        ({SCHED: LATER * 5, CMDS: [_command("new")]}, False, "holds another record than the one read there"),
    ],
    ids=["shorter, embedded broker", "shorter, apache kafka", "recreated longer"],
)
async def test_a_checkpoint_the_broker_no_longer_matches_is_refused_and_the_topics_replayed(
    tmp_path: Path, recreated: dict[TopicPartition, list[bytes]], resets: bool, reason: str
) -> None:
    first = _agent(tmp_path)
    await _started(first, FakeConsumer({SCHED: list(HISTORY), CMDS: [_command("old")]}))
    await first.intake.save(force=True)

    again, full = _agent(tmp_path), _agent()
    broker = FakeConsumer(recreated)
    broker.resets_past_the_end = resets
    await _started(again, broker)
    await _started(full, FakeConsumer(recreated))
    assert again.intake.refused is not None
    assert re.search(reason, again.intake.refused)
    assert again.intake.restored == 0
    assert again.intake.first_offsets == full.intake.first_offsets
    assert again.book.allocations() == full.book.allocations()


async def test_history_past_the_catch_up_deadline_is_still_not_live(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake_module, "CATCH_UP_S", 0.0)  # the ticks start before anything is read
    agent = _agent()
    consumer = FakeConsumer({SCHED: list(HISTORY), CMDS: [_command("old")]})
    consumer.silent_fetches = 1  # nothing read within the (zero) deadline
    await _started(agent, consumer)
    assert agent.book.allocations() == {}
    consumer.logs[CMDS].append(_command("new"))
    agent.intake.apply_batches(await consumer.getmany())  # what listen() does
    assert [c.command_id for c in agent.commands] == ["new"]
    assert set(agent.book.allocations()) == {GPUS[0], GPUS[2], GPUS[3]}


async def test_a_short_end_offsets_answer_does_not_make_the_last_batch_of_history_live() -> None:
    agent = _agent()
    consumer = FakeConsumer({SCHED: list(HISTORY), CMDS: [_command("old-1"), _command("old-2")]})
    consumer.listed_short_by = 1  # the embedded broker: an offset inside the last batch
    await _started(agent, consumer)
    consumer.logs[CMDS].append(_command("new"))
    agent.intake.apply_batches(await consumer.getmany())
    assert [c.command_id for c in agent.commands] == ["new"]


async def test_caught_up_is_told_once_the_history_is_applied_and_not_before() -> None:
    agent = _agent()
    told: list[str] = []
    agent.intake.when_caught_up(lambda: told.append("before"))
    await _started(agent, FakeConsumer({SCHED: list(HISTORY), CMDS: [_command("old")]}))
    assert agent.intake.caught_up
    assert told == ["before"]
    agent.intake.when_caught_up(lambda: told.append("after"))  # already caught up: at once
    assert told == ["before", "after"]


async def test_a_catch_up_past_its_deadline_tells_caught_up_only_when_listen_reaches_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(intake_module, "CATCH_UP_S", 0.0)
    agent = _agent()
    told: list[bool] = []
    stop = asyncio.Event()

    def caught_up() -> None:
        told.append(bool(agent.book.allocations()))
        stop.set()  # listen() stops after this batch

    agent.intake.when_caught_up(caught_up)
    consumer = FakeConsumer({SCHED: list(HISTORY), CMDS: [_command("old")]})
    consumer.silent_fetches = 1
    await _started(agent, consumer)
    assert not agent.intake.caught_up
    assert told == []
    await asyncio.wait_for(agent.intake.listen(consumer, stop), timeout=5.0)
    assert told == [True]  # told once, with the history's placements in the book
