"""What the agent reads: scheduler records into its book of placements, commands, and the checkpoint.

At start the agent applies the history of `scheduler.workloads` and `telemetry.agent` (and reads
`inventory.events` for its GPUs' partition changes) as it stood then
(the end offsets it captures first) as history: placements rebuild the book, commands from then are
stale and skipped. With TELEMETRY_AGENT_STATE_DIR the history is the checkpoint's kept records plus
what came after its positions (checkpoint.py); without it, or when the checkpoint is refused, it is
the topics from the earliest offset. Records past the captured ends are live, whenever they are read.
Partition changes are desired states, not one-off commands: they are handed on in history and live alike
(the agent skips a layout its GPU already has).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from libs.common.bus.kafka import DEFAULT_FETCH_MAX_WAIT_MS
from libs.common.events import EVENT_TYPES, Event, EventDecodeError, decode
from libs.common.events import topics as t
from libs.common.events.agent import HostActionRequestedV1, SimFaultRequestedV1, WorkloadProfileSetV1
from libs.common.events.inventory import GpuPartitionsChangedV1
from libs.common.events.scheduler import WorkloadReallocatedV1
from services.telemetry.adapters.agent.checkpoint import (
    FILE_NAME,
    Checkpoint,
    CheckpointRefused,
    KeptRecords,
    Origin,
    encode_checkpoint,
    kept_workload,
    load_checkpoint,
    write_atomically,
)
from services.telemetry.adapters.agent.resume import resume

__all__ = [
    "CATCH_UP_S",
    "CHECKPOINT_EVERY_S",
    "Book",
    "Command",
    "Intake",
    "IntakeSettings",
    "PartitionsChanged",
]

log = logging.getLogger(__name__)
Command = SimFaultRequestedV1 | WorkloadProfileSetV1 | HostActionRequestedV1
#: Called with an inventory partitions change of this agent's GPUs and the change's event id.
PartitionsChanged = Callable[[GpuPartitionsChangedV1, str], None]
CATCH_UP_S = 30.0  # the first tick waits at most this long for the history (samples must flow)
CHECKPOINT_EVERY_S = 5.0  # at most one checkpoint write per this many seconds


class IntakeSettings(Protocol):
    """The settings the intake reads (the service's settings have them)."""

    @property
    def kafka_bootstrap_servers(self) -> str: ...
    @property
    def kafka_topic_prefix(self) -> str: ...
    @property
    def agent_state_dir(self) -> Path | None: ...
    def topic(self, logical: str) -> str: ...


class Book(Protocol):
    """The agent's book of placements, as the intake feeds it (the service's PlacementBook)."""

    def holds(self, workload_id: str) -> bool: ...
    def apply(self, event: Event, *, at: datetime) -> None: ...


class Intake:
    """The agent's consumer side: applies records to the book, runs live commands, keeps the checkpoint."""

    def __init__(
        self,
        *,
        settings: IntakeSettings,
        book: Book,
        gpus: frozenset[str],
        command: Callable[[Command], None],
        partitions: PartitionsChanged | None = None,
    ) -> None:
        self._s = settings
        self._book = book
        self._command = command
        self._partitions = partitions
        self._gpus = gpus
        self._kept = KeptRecords(holds=book.holds)
        self._origin = Origin.of(
            bootstrap=settings.kafka_bootstrap_servers, topic_prefix=settings.kafka_topic_prefix, gpus=gpus
        )
        self._scheduler_topic = settings.topic(t.SCHEDULER)
        self._ends: dict[TopicPartition, int] = {}  # history ends here: records before are never live
        self._saved_at = -math.inf
        self.first_offsets: dict[TopicPartition, int] = {}  # the first offset read per partition
        self.restored = 0  # records re-applied from the checkpoint
        self.refused: str | None = None  # why the checkpoint was not used, when there was one
        #: True once every record of the history is applied (at the end of catch_up, or later in listen
        #: when catch_up ran out of time); then the callbacks of when_caught_up run, once each.
        self.caught_up = False
        self._on_caught_up: list[Callable[[], None]] = []

    def when_caught_up(self, callback: Callable[[], None]) -> None:
        """Call back once the whole history is applied (at once when it already is): what is decided from
        the whole book (a Pod with no placement is an orphan; a GPU is idle) waits for it."""
        if self.caught_up:
            callback()
        else:
            self._on_caught_up.append(callback)

    def _reached_end(self) -> None:
        self.caught_up = True
        callbacks, self._on_caught_up = self._on_caught_up, []
        for callback in callbacks:
            callback()

    async def _at_end(self, consumer: AIOKafkaConsumer) -> bool:
        return all([await consumer.position(tp) >= end for tp, end in self._ends.items()])

    @property
    def path(self) -> Path | None:
        """The checkpoint file, when TELEMETRY_AGENT_STATE_DIR is set."""
        directory = self._s.agent_state_dir
        return directory / FILE_NAME if directory is not None else None

    def consumer(self) -> AIOKafkaConsumer:
        """No group: every agent reads every partition (placements are filtered by GPU)."""
        return AIOKafkaConsumer(
            self._scheduler_topic,
            self._s.topic(t.NODE_AGENT),
            self._s.topic(t.INVENTORY),
            bootstrap_servers=self._s.kafka_bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            # aiokafka's 500 ms default: the embedded broker holds each fetch that long, even with a
            # placement waiting, which was most of placed-to-running (bench/runner_start.py).
            fetch_max_wait_ms=DEFAULT_FETCH_MAX_WAIT_MS,
        )

    async def catch_up(self, consumer: AIOKafkaConsumer) -> None:
        """Rebuild the book from the history before the first tick; past CATCH_UP_S the ticks start
        anyway and listen() applies the rest, still as history."""
        deadline = time.monotonic() + CATCH_UP_S
        # Not getmany: nothing may be applied before the checkpoint is. (Without a group, start()
        # assigns every partition already; aiokafka has no public event to wait on otherwise.)
        while not consumer.assignment() and time.monotonic() < deadline:  # noqa: ASYNC110 - see above
            await asyncio.sleep(0.1)
        await self._restore(consumer)
        listed = await consumer.end_offsets(list(consumer.assignment()))
        # The embedded broker's ListOffsets answer falls inside a partition's last batch; the first
        # fetch's high watermark is the end as it stood then (libs.common.bus.kafka.log_end_offsets).
        first = await consumer.getmany(timeout_ms=200, max_records=1000)
        self._ends = {tp: max(end, consumer.highwater(tp) or 0) for tp, end in listed.items()}
        self.apply_batches(first)
        deadline = time.monotonic() + CATCH_UP_S
        while time.monotonic() < deadline:
            if await self._at_end(consumer):
                self._reached_end()
                return
            self.apply_batches(await consumer.getmany(timeout_ms=200, max_records=1000))
        log.warning("history not read within %.0fs: ticking meanwhile, it stays history", CATCH_UP_S)

    async def listen(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        """Apply records as they come until stop is set."""
        while not stop.is_set():
            self.apply_batches(await consumer.getmany(timeout_ms=200, max_records=1000))
            if not self.caught_up and await self._at_end(consumer):
                log.info("history read: decisions that need the whole book go ahead")
                self._reached_end()

    def apply_batches(self, batches: Mapping[TopicPartition, Sequence[ConsumerRecord[bytes, bytes]]]) -> None:
        """Apply fetched records; those before the history's end are never live."""
        for tp, records in batches.items():
            end = self._ends.get(tp, 0)
            for record in records:
                self.apply(tp, offset=record.offset, raw=record.value, live=record.offset >= end)

    def apply(self, tp: TopicPartition, *, offset: int, raw: bytes | None, live: bool) -> None:
        """Apply one record and read on after it."""
        self.first_offsets.setdefault(tp, offset)
        self._kept.advance(tp, offset=offset, value=raw)
        self._apply(raw, live=live, keep=tp.topic == self._scheduler_topic)

    def _apply(self, raw: bytes | None, *, live: bool, keep: bool) -> None:
        try:
            envelope, event = decode(raw or b"", EVENT_TYPES)
        except EventDecodeError:
            return  # not ours to judge: the topic's real consumers dead-letter it
        if isinstance(event, SimFaultRequestedV1 | WorkloadProfileSetV1 | HostActionRequestedV1):
            if live:
                self._command(event)
            return
        if isinstance(event, GpuPartitionsChangedV1):
            if self._partitions is not None and event.gpu_uuid in self._gpus:
                self._partitions(event, envelope.id)
            return
        # A reallocation changes which GPUs a held placement's samples go to: the checkpoint keeps it too.
        reallocated = event.workload_id if isinstance(event, WorkloadReallocatedV1) else None
        workload_id = (kept_workload(event) or reallocated) if keep else None
        was_held = workload_id is not None and self._book.holds(workload_id)
        self._book.apply(event, at=envelope.time)
        if workload_id is not None:
            self._kept.note(workload_id, raw or b"", was_held=was_held)

    def changed(self) -> None:
        """The book changed by itself (a runner report ended a placement): the checkpoint is stale."""
        self._kept.dirty = True

    def snapshot(self) -> Checkpoint:
        """The checkpoint of now."""
        self._kept.prune()
        return self._kept.snapshot(self._origin)

    def restore(self, checkpoint: Checkpoint) -> None:
        """Re-apply a checkpoint's kept records, in order, and read on from its positions."""
        for raw in checkpoint.records:
            self._apply(raw, live=False, keep=True)
        self._kept.resume(checkpoint.positions)
        self.restored = len(checkpoint.records)

    async def _restore(self, consumer: AIOKafkaConsumer) -> None:
        """Resume from a usable checkpoint; otherwise the consumer stays at (or goes back to) the earliest."""
        path = self.path
        if path is None:
            return
        try:
            checkpoint = load_checkpoint(path, expect=self._origin)
        except CheckpointRefused as exc:
            self._refuse(path, exc.reason)
            return
        if checkpoint is None:
            log.info("no checkpoint at %s yet: reading the topics from the beginning", path)
            return
        try:
            reason = await resume(consumer, checkpoint)
        except KafkaError as exc:
            reason = f"the broker could not confirm its positions: {exc!r}"
        if reason is not None:
            self._refuse(path, reason)
            await consumer.seek_to_beginning()
            return
        self.restore(checkpoint)
        held = len(self._kept.workloads())
        log.info("resumed from %s: %d records of %d workloads", path, self.restored, held)

    def _refuse(self, path: Path, reason: str) -> None:
        self.refused = reason
        log.warning("checkpoint %s not used (%s): reading the topics from the beginning", path, reason)

    async def save(self, *, force: bool = False) -> None:
        """Write the checkpoint when something changed, at most every CHECKPOINT_EVERY_S unless forced.

        Call it only once the reports of every tick so far are acknowledged: a workload whose exit a
        report told is forgotten here, and a restart would not tell it again.
        """
        path = self.path
        now = time.monotonic()
        if path is None or not self._kept.dirty or (not force and now - self._saved_at < CHECKPOINT_EVERY_S):
            return
        data = encode_checkpoint(self.snapshot())
        self._kept.dirty, self._saved_at = False, now
        try:
            await asyncio.to_thread(write_atomically, path, data)
        except OSError as exc:  # the older checkpoint stays valid, only further behind
            self._kept.dirty = True
            log.warning("could not write the checkpoint %s: %s", path, exc)
