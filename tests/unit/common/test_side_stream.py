"""The side-stream loop commits what its reader handled, at the reader's cadence, and never after an error."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import TopicPartition

from libs.common.bus import side_stream
from libs.common.bus.side_stream import CommitCadence, Poll, SideStream
from libs.common.settings import BaseServiceSettings

TP0, TP1 = TopicPartition("samples", 0), TopicPartition("samples", 1)


@dataclass
class _Record:
    offset: int
    value: bytes = b""


@dataclass
class _Consumer:
    """Scripted polls; records every commit. Stops the stream once the script is played."""

    polls: list[Poll]
    done: asyncio.Event
    assigned: set[TopicPartition] = field(default_factory=lambda: {TP0, TP1})
    commits: list[dict[TopicPartition, int]] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)  # topics the broker dropped (its metadata says so)
    started: bool = False
    stopped: bool = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def getmany(
        self, *, timeout_ms: int, max_records: int
    ) -> Mapping[TopicPartition, Sequence[_Record]]:
        if not self.polls:
            self.done.set()
            return {}
        return self.polls.pop(0)

    def assignment(self) -> set[TopicPartition]:
        return self.assigned

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return None if topic in self.deleted else {0, 1}


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _stream(consumer: _Consumer, *, every_s: float, clock: _Clock | None = None) -> SideStream:
    return SideStream(
        consumer=consumer,
        cadence=CommitCadence(every_s=every_s),
        clock=clock or _Clock(),
    )


async def _ignore(poll: Poll) -> None:
    return None


async def test_with_a_zero_cadence_every_handled_poll_is_committed_at_its_last_offset_plus_one() -> None:
    stop = asyncio.Event()
    consumer = _Consumer([{TP0: [_Record(4), _Record(5)]}, {}, {TP1: [_Record(9)]}], stop)
    await _stream(consumer, every_s=0).run(stop, _ignore)
    assert consumer.commits == [{TP0: 6}, {TP1: 10}]
    assert consumer.started
    assert consumer.stopped


async def test_with_an_interval_polls_are_committed_together_and_the_rest_at_a_clean_stop() -> None:
    stop, clock = asyncio.Event(), _Clock()
    consumer = _Consumer([{TP0: [_Record(1)]}, {TP0: [_Record(2)]}, {TP1: [_Record(7)]}], stop)
    handled: list[int] = []

    async def handle(poll: Poll) -> None:
        handled.extend(r.offset for records in poll.values() for r in records)
        clock.now += 1.0

    await _stream(consumer, every_s=2.5, clock=clock).run(stop, handle)
    # 100 -> first commit at once (never committed), then 2.5 s must pass; the stop commits the rest.
    assert consumer.commits == [{TP0: 2}, {TP0: 3, TP1: 8}]
    assert handled == [1, 2, 7]


async def test_nothing_is_committed_after_the_reader_fails() -> None:
    stop = asyncio.Event()
    consumer = _Consumer([{TP0: [_Record(1)]}, {TP0: [_Record(2)]}], stop)
    calls = 0

    async def handle(poll: Poll) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("the write failed")

    with pytest.raises(RuntimeError, match="the write failed"):
        await _stream(consumer, every_s=0).run(stop, handle)
    assert consumer.commits == [{TP0: 2}], "the failed poll's offsets stay uncommitted, to be replayed"
    assert consumer.stopped


async def test_partitions_taken_by_a_rebalance_are_not_committed() -> None:
    stop = asyncio.Event()
    consumer = _Consumer([{TP0: [_Record(1)], TP1: [_Record(3)]}], stop)

    async def handle(poll: Poll) -> None:
        consumer.assigned = {TP1}

    await _stream(consumer, every_s=0).run(stop, handle)
    assert consumer.commits == [{TP1: 4}]


async def test_partitions_of_a_deleted_topic_are_not_committed() -> None:
    old = TopicPartition("samples.0", 0)  # a past generation the keeper dropped, still assigned
    stop = asyncio.Event()
    consumer = _Consumer(polls=[{old: [_Record(7)], TP0: [_Record(3)]}], done=stop, assigned={old, TP0, TP1})
    consumer.deleted = {"samples.0"}

    await _stream(consumer, every_s=0).run(stop, _ignore)

    assert consumer.commits == [{TP0: 4}]


def test_the_cadence_defaults_to_every_poll() -> None:
    assert CommitCadence().every_s == 0.0


def _consumer_args(monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(side_stream, "create_consumer", lambda **args: seen.update(args))
    settings = BaseServiceSettings(service_name="recovery", kafka_fetch_max_wait_ms=40)
    side_stream.side_stream_consumer(settings, name="samples", topic="telemetry.samples", **kwargs)
    return seen


def test_a_side_stream_consumer_is_the_services_group_on_the_topic_with_the_settings_fetch_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = _consumer_args(monkeypatch)
    assert (args["group_id"], args["client_id"], args["topics"]) == (
        "recovery.samples",
        "recovery.samples",
        ["telemetry.samples"],
    )
    assert args["fetch_max_wait_ms"] == 40
    # A rolling topic: every generation, by pattern, its metadata refreshed ten times a generation.
    assert (args["pattern"], args["metadata_max_age_ms"]) == (r"^telemetry\.samples(\.\d+)?$", 30000)


def test_a_topic_that_keeps_its_history_is_subscribed_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(side_stream, "create_consumer", lambda **args: seen.update(args))
    side_stream.side_stream_consumer(BaseServiceSettings(), name="faults", topic="telemetry.faults")
    assert (seen["topics"], seen["pattern"]) == (["telemetry.faults"], None)


def test_a_reader_may_name_its_own_client_id_and_fetch_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    args = _consumer_args(monkeypatch, client_id="telemetry.samples", fetch_max_wait_ms=25)
    assert (args["client_id"], args["fetch_max_wait_ms"]) == ("telemetry.samples", 25)
