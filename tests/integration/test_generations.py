"""Topic generations on the real broker: readers follow them by pattern, the keeper frees what was read.

The keeper is stepped at chosen times (its clock is a parameter), so three generations of a 300 s topic
pass in seconds; the reader is a side-stream consumer as telemetry, alerting and recovery build theirs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from libs.common.bus.generations import Generations, keep_generations, keeper_of
from libs.common.bus.kafka import create_producer, ensure_topics, group_lag, log_end_offsets
from libs.common.bus.side_stream import CommitCadence, Poll, SideStream, side_stream_consumer
from libs.common.events import topics
from libs.common.settings import BaseServiceSettings
from tests.integration.support import Isolation, eventually

pytestmark = pytest.mark.integration

EVERY_S = 300
T0 = 1_800_000_000 // EVERY_S * EVERY_S  # a generation's start


def _settings(isolation: Isolation, *, every_s: int = EVERY_S) -> BaseServiceSettings:
    return BaseServiceSettings(
        service_name="telemetry",
        kafka_bootstrap_servers=isolation.infra.kafka,
        kafka_topic_prefix=isolation.topic_prefix,
        kafka_generation_s=every_s,
    )


async def _topics(bootstrap: str, prefix: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return {t for t in await admin.list_topics() if t.startswith(prefix)}
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = create_producer(bootstrap=bootstrap, client_id="generations-test")
    await producer.start()
    try:
        for value in values:
            await producer.send(topic, value=value, key=value[-1:])
        await producer.flush()
    finally:
        await producer.stop()


async def _commit_to_end(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """What a reader that has read ``topic`` to its end leaves: its group's offsets at every log end."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = await log_end_offsets(bootstrap=bootstrap, partitions=tps)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(tps)
        await consumer.commit({tp: end for tp, end in ends.items() if end})
    finally:
        await consumer.stop()


@asynccontextmanager
async def _reading(s: BaseServiceSettings, *, check_every_s: float = 5.0) -> AsyncIterator[list[bytes]]:
    """A side-stream reader of the samples, as telemetry builds its own, committing every poll; yields
    the values it has read so far, and stops (committing what it read) on leaving."""
    got: list[bytes] = []

    async def handle(poll: Poll) -> None:
        got.extend(r.value or b"" for records in poll.values() for r in records)

    stop = asyncio.Event()
    stream = SideStream(
        consumer=side_stream_consumer(s, name="samples", topic=topics.TELEMETRY_SAMPLES),
        cadence=CommitCadence(every_s=0),
        check_every_s=check_every_s,
    )
    reading = asyncio.create_task(stream.run(stop, handle))
    try:
        yield got
    finally:
        stop.set()
        await reading


def _all(got: list[bytes], sent: list[bytes]) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return set(got) >= set(sent)

    return probe


async def test_a_reader_follows_the_generations_and_the_keeper_deletes_each_once_it_is_read(
    isolation: Isolation,
) -> None:
    s = _settings(isolation)
    bootstrap, keeper = s.kafka_bootstrap_servers, keeper_of(s, topics.TELEMETRY_SAMPLES)
    gen = keeper.generations
    await keeper.step(T0 + 1)  # the first generation and the next
    sent: list[bytes] = []
    async with _reading(s) as got:
        for n in range(3):
            start = T0 + n * EVERY_S
            await keeper.step(start + 1)  # as the keeper's loop does a second into each generation
            values = [f"gen{n}-{i}".encode() for i in range(30)]
            await _produce(bootstrap, gen.topic_at(start), values)
            sent += values
            await eventually(_all(got, sent), timeout=60, what=f"generation {n} read")
        # Generation 0 is older than the one kept: once the reader has committed it all, a step deletes it.
        group, tps = s.group_id("samples"), [TopicPartition(gen.topic_at(T0), p) for p in range(3)]

        async def committed() -> bool:
            return await group_lag(bootstrap=bootstrap, group=group, partitions=tps) == 0

        await eventually(committed, timeout=30, what="generation 0 committed")
        deleted = await keeper.step(T0 + 2 * EVERY_S + 2)
    assert set(got) == set(sent)
    assert deleted == [gen.topic_at(T0)]
    left = await _topics(bootstrap, gen.base)
    assert left == {gen.topic_at(T0 + n * EVERY_S) for n in (1, 2, 3)}


async def test_a_reader_whose_past_generation_is_deleted_under_it_reads_on_without_replaying(
    isolation: Isolation,
) -> None:
    s = _settings(isolation)
    bootstrap, keeper = s.kafka_bootstrap_servers, keeper_of(s, topics.TELEMETRY_SAMPLES)
    gen = keeper.generations
    old, current = gen.topic_at(T0), gen.topic_at(T0 + EVERY_S)
    await keeper.step(T0)
    await keeper.step(T0 + EVERY_S)
    async with _reading(s, check_every_s=1.0) as got:
        first = [f"old-{i}".encode() for i in range(20)] + [f"cur-{i}".encode() for i in range(20)]
        await _produce(bootstrap, old, first[:20])
        await _produce(bootstrap, current, first[20:])
        await eventually(_all(got, first), timeout=60, what="both generations read")
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([old])  # as a forced step does, while the reader is assigned it
        finally:
            await admin.close()
        later = [f"later-{i}".encode() for i in range(20)]
        await _produce(bootstrap, current, later)
        await eventually(_all(got, later), timeout=60, what="the current generation read on")
        await asyncio.sleep(3)  # three log checks: none may send the current generation back to its start
    current_reads = [v for v in got if not v.startswith(b"old-")]
    assert sorted(current_reads) == sorted(first[20:] + later)  # each once: nothing read again


async def test_a_generation_a_reader_has_not_finished_is_kept_until_forced_and_the_force_is_logged(
    isolation: Isolation, caplog: pytest.LogCaptureFixture
) -> None:
    s = _settings(isolation)
    bootstrap, keeper = s.kafka_bootstrap_servers, keeper_of(s, topics.TELEMETRY_SAMPLES)
    gen = keeper.generations
    first = gen.topic_at(T0)
    await keeper.step(T0)
    await _produce(bootstrap, first, [b"a1", b"a2", b"a3"])
    behind = f"{isolation.topic_prefix}alerting.samples"  # a reader ROLLING_TOPICS names
    await _commit_to_end(bootstrap, behind, first, s.kafka_partitions)
    await _produce(bootstrap, first, [b"a4"])  # ... which has not read this one yet

    assert await keeper.step(T0 + 2 * EVERY_S) == []  # expired, but alerting has not read it all
    assert first in await _topics(bootstrap, gen.base)
    await _commit_to_end(bootstrap, behind, first, s.kafka_partitions)
    assert await keeper.step(T0 + 2 * EVERY_S + 1) == [first]  # read now: deleted

    second = gen.topic_at(T0 + EVERY_S)
    await _produce(bootstrap, second, [b"b1"])  # nobody reads it
    await _commit_to_end(bootstrap, behind, second, s.kafka_partitions)
    await _produce(bootstrap, second, [b"b2"])
    # Read to its end, an expired generation goes (the empty ones here); this one waits for alerting ...
    assert second not in await keeper.step(T0 + 5 * EVERY_S)  # ... until four later ones have ended
    with caplog.at_level(logging.WARNING, logger="libs.common.bus.generations"):
        assert second in await keeper.step(T0 + 6 * EVERY_S)
    assert second not in await _topics(bootstrap, gen.base)
    assert f"deleting generation {second} although {behind} have not read it" in caplog.text


async def test_the_keepers_loop_recreates_the_live_generations_a_broker_lost(isolation: Isolation) -> None:
    s = _settings(isolation, every_s=10)
    gen = keeper_of(s, topics.TELEMETRY_SAMPLES).generations
    bootstrap = s.kafka_bootstrap_servers
    stop = asyncio.Event()
    keeping = asyncio.create_task(keep_generations(s, topics.TELEMETRY_SAMPLES, stop))
    try:
        created = await eventually(
            lambda: _live(bootstrap, gen), timeout=30, what="the live generations created by the keeper"
        )
        assert len(created) == 2
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_topics(sorted(created))  # as a broker restarting empty loses them
        finally:
            await admin.close()
        # A step a second into each generation (every 10 s here) creates them again.
        assert len(await eventually(lambda: _live(bootstrap, gen), timeout=30, what="recreated")) == 2
    finally:
        stop.set()
        await keeping


async def _live(bootstrap: str, gen: Generations) -> set[str] | None:
    live = set(gen.live(time.time()))
    return live if live <= await _topics(bootstrap, gen.base) else None


async def test_without_generations_readers_and_writers_use_the_topic_itself(isolation: Isolation) -> None:
    s = _settings(isolation, every_s=0)
    base = s.topic(topics.TELEMETRY_SAMPLES)
    await ensure_topics(bootstrap=s.kafka_bootstrap_servers, topics=[base], partitions=s.kafka_partitions)
    assert await keeper_of(s, topics.TELEMETRY_SAMPLES).step(T0) == []
    await _produce(s.kafka_bootstrap_servers, base, [b"x1", b"x2"])
    async with _reading(s) as got:
        await eventually(_all(got, [b"x1", b"x2"]), timeout=30, what="both read")
    assert await _topics(s.kafka_bootstrap_servers, base) == {base}
