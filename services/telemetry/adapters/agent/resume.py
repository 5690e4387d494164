"""Resuming the agent's consumer at a checkpoint's positions, only where the broker has the same log.

A position is usable when it lies in the partition's current [beginning, end] and the record just
before it is the one the agent read there (its fingerprint): the embedded broker keeps topics in memory,
so after its restart a recreated topic can be long enough to hold an old position by chance.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition

from services.telemetry.adapters.agent.checkpoint import Checkpoint, Position, fingerprint

__all__ = ["resume"]

TAIL_READ_S = 10.0  # reading back the records before the saved positions; past that, replay instead


async def resume(consumer: AIOKafkaConsumer, checkpoint: Checkpoint) -> str | None:
    """Seek the consumer to the checkpoint's positions and return None, or return why they are unusable.

    Partitions the checkpoint does not name are left where the consumer starts (the earliest offset):
    the agent never read from them. After a refusal the caller resets every partition.
    """
    saved = checkpoint.positions
    missing = sorted(tp for tp in saved if tp not in consumer.assignment())
    if missing:
        return f"{_name(missing[0])} is not in the topic any more"
    begins = await consumer.beginning_offsets(list(saved))
    ends = await consumer.end_offsets(list(saved))
    for tp, position in sorted(saved.items()):
        if position.next_offset < begins[tp] or (position.tail is None and position.next_offset > ends[tp]):
            return _outside(tp, position, begins[tp], ends[tp])
    reason = await _tails_match(consumer, saved, begins=begins, ends=ends)
    if reason is not None:
        return reason
    for tp, position in saved.items():
        consumer.seek(tp, position.next_offset)
    return None


async def _tails_match(
    consumer: AIOKafkaConsumer,
    saved: Mapping[TopicPartition, Position],
    *,
    begins: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
) -> str | None:
    """Read the record before each saved position (where it still exists) and compare fingerprints.

    A position past the end shows as a fetch that returns nothing under a high watermark below it (the
    embedded broker), or as records from the beginning after the consumer's reset (Apache Kafka). The end
    offsets alone do not tell: the embedded broker answers an offset inside the last batch.
    """
    want = {tp: p for tp, p in saved.items() if p.tail is not None and p.next_offset > begins[tp]}
    for tp, position in want.items():
        consumer.seek(tp, position.next_offset - 1)
    deadline = time.monotonic() + TAIL_READ_S
    while want and time.monotonic() < deadline:
        batches = await consumer.getmany(*want, timeout_ms=200)
        for tp, records in batches.items():
            position = want.pop(tp)
            if records[0].offset < position.next_offset - 1:
                # Apache Kafka answers a fetch past the end with OFFSET_OUT_OF_RANGE, and the consumer
                # (auto_offset_reset=earliest) starts over from the beginning.
                return _outside(tp, position, begins[tp], max(ends[tp], consumer.highwater(tp) or 0))
            if (
                records[0].offset != position.next_offset - 1
                or fingerprint(records[0].value) != position.tail
            ):
                offset = position.next_offset - 1
                return f"{_name(tp)} offset {offset} holds another record than the one read there"
        for tp, position in want.items():
            highwater = consumer.highwater(tp)  # None until a fetch of this partition answered
            if highwater is not None and position.next_offset > max(ends[tp], highwater):
                return _outside(tp, position, begins[tp], max(ends[tp], highwater))
    if want:
        return f"could not read back {len(want)} partition(s) within {TAIL_READ_S:.0f}s"
    return None


def _outside(tp: TopicPartition, position: Position, begin: int, end: int) -> str:
    return (
        f"{_name(tp)} position {position.next_offset} is outside [{begin}, {end}] "
        "(topic recreated, or records expired before they were read)"
    )


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}[{tp.partition}]"
