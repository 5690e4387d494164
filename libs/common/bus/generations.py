"""Topic generations: a topic that needs no history, written as a series of short-lived topics.

The embedded broker (Tansu 0.6, memory storage) honours neither ``retention.ms`` nor DeleteRecords, and
each fetch walks every batch a partition holds, so a busy topic costs more memory and more CPU the longer
the stack runs. Only DeleteTopics frees records. So the samples topic is written in generations: the
records of the wall-clock window that starts at epoch second ``S`` (a multiple of ``every_s``) go to
``<topic>.<S>``; readers subscribe by pattern and follow from one generation to the next, and a keeper
(``GenerationKeeper``, run by the topic's owner) creates each generation a window ahead and deletes those
older than the ``keep`` last finished ones once every reader group has read them to the end (or, whatever
a group's lag, once ``force_after`` later generations have ended, so one stopped reader cannot hold the
broker's memory). A writer's clock may be off by less than a generation: the one before and the one
after the current exist.

Each creation and deletion changes the readers' subscriptions: their groups rebalance, which the embedded
broker answers after about 5 s, once per window (the keeper deletes and creates in one step).
``every_s = 0`` writes the topic itself, for a broker whose retention keeps it short (Apache Kafka).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from libs.common.bus.kafka import all_physical_topics, ensure_topics, group_lag
from libs.common.events.topics import ROLLING_TOPICS
from libs.common.settings import BaseServiceSettings
from libs.common.stopping import sleep_or_stop

__all__ = [
    "GenerationKeeper",
    "Generations",
    "RollingSettings",
    "generations_of",
    "keep_generations",
    "keeper_of",
    "live_topics",
    "stack_topics",
]

#: The keeper's longest wait between two steps (a broker that restarted empty gets its generations back).
CHECK_EVERY_S = 30.0

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Generations:
    """Where a rolling topic is written at a given time, and which of its generations have expired.

    ``base``: the physical topic name (prefix applied). ``every_s``: a generation's length in seconds, 0 for
    no generations. ``keep``: finished generations kept for late readers besides the current one.
    """

    base: str
    every_s: int
    keep: int = 1

    def __post_init__(self) -> None:
        if self.every_s < 0 or self.keep < 0:
            raise ValueError(f"every_s and keep must be >= 0, got {self.every_s} and {self.keep}")

    @property
    def rolling(self) -> bool:
        return self.every_s > 0

    def start_of(self, now: float) -> int:
        """The epoch second the generation written at ``now`` began."""
        return int(now // self.every_s) * self.every_s

    def topic_at(self, now: float) -> str:
        """The topic a record produced at ``now`` (wall clock, epoch seconds) goes to."""
        return f"{self.base}.{self.start_of(now)}" if self.rolling else self.base

    def live(self, now: float) -> list[str]:
        """The topics that must exist at ``now``: the current generation and the next."""
        if not self.rolling:
            return [self.base]
        return [self.topic_at(now), self.topic_at(now + self.every_s)]

    def pattern(self) -> str:
        """The regular expression a reader subscribes with: every generation, and the topic itself (where a
        writer that knows no generations writes: an older agent, a tool)."""
        return rf"^{re.escape(self.base)}(\.\d+)?$"

    def started(self, topic: str) -> int | None:
        """The epoch second a generation topic began; None for any other topic."""
        head, _, tail = topic.rpartition(".")
        return int(tail) if self.rolling and head == self.base and tail.isdigit() else None

    def older(self, topics: Iterable[str], now: float, *, than: int) -> list[str]:
        """The generations among ``topics`` that began at least ``than`` generations before ``now``'s."""
        oldest_kept = self.start_of(now) - (than - 1) * self.every_s
        return sorted(t for t in topics if (start := self.started(t)) is not None and start < oldest_kept)


class GenerationKeeper:
    """Creates a rolling topic's generations ahead and deletes the expired ones: ``await keeper.step(now)``.

    ``readers``: the consumer groups (physical ids) that must have read a generation to its end before it
    is deleted; a group the broker does not know is not waited for. Every replica of the owner may run a
    keeper: creating what exists and deleting what is gone are no-ops.
    """

    def __init__(
        self,
        generations: Generations,
        *,
        bootstrap: str,
        partitions: int,
        readers: Sequence[str],
        force_after: int = 4,
    ) -> None:
        self.generations = generations
        self._bootstrap = bootstrap
        self._partitions = partitions
        self._readers = tuple(readers)
        self._force_after = max(force_after, generations.keep + 1)  # generations after the doomed one

    async def step(self, now: float) -> list[str]:
        """Create the live generations that are missing, delete the expired ones; returns those deleted."""
        g = self.generations
        if not g.rolling:
            return []
        admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap, request_timeout_ms=15000)
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            expired = g.older(existing, now, than=g.keep + 1)
            known = {group for group, *_ in await admin.list_consumer_groups()} if expired else set()
            doomed = [t for t in expired if await self._may_delete(known, t, now)]
            if doomed:  # first, so that readers see the deletion and the creation in one metadata change
                try:
                    await admin.delete_topics(doomed)
                except KafkaError as exc:  # another replica's keeper deleted them a moment ago
                    log.info("deleting generations raced with another keeper: %s", exc)
                log.info("deleted expired generations %s", ", ".join(doomed))
        finally:
            await admin.close()
        if missing := set(g.live(now)) - existing:
            await ensure_topics(bootstrap=self._bootstrap, topics=missing, partitions=self._partitions)
        return doomed

    async def _may_delete(self, known: set[str], topic: str, now: float) -> bool:
        """Every known reader has read ``topic`` to its end, or ``force_after`` generations followed it."""
        g = self.generations
        if g.older([topic], now, than=self._force_after + 1):
            behind = await self._behind(known, topic)
            if behind:
                log.warning(
                    "deleting generation %s although %s have not read it to its end (%d generations "
                    "followed it): their records in it are dropped",
                    topic,
                    ", ".join(behind),
                    self._force_after,
                )
            return True
        return not await self._behind(known, topic)

    async def _behind(self, known: set[str], topic: str) -> list[str]:
        """The reader groups the broker knows (``known``) that have not committed ``topic``'s every record."""
        partitions = [TopicPartition(topic, p) for p in range(self._partitions)]
        behind = []
        for group in self._readers:
            if group not in known:
                continue
            if await group_lag(bootstrap=self._bootstrap, group=group, partitions=partitions):
                behind.append(group)
        return behind


class RollingSettings(Protocol):
    """What naming a rolling topic's generations reads of the settings (BaseServiceSettings has it)."""

    @property
    def kafka_topic_prefix(self) -> str: ...
    @property
    def kafka_generation_s(self) -> int: ...
    def topic(self, logical: str) -> str: ...


def generations_of(settings: RollingSettings, logical: str) -> Generations:
    """How ``logical`` is written under ``settings``: in generations if it is a rolling topic."""
    every_s = settings.kafka_generation_s if logical in ROLLING_TOPICS else 0
    return Generations(base=settings.topic(logical), every_s=every_s)


def live_topics(settings: RollingSettings, now: float) -> list[str]:
    """Every rolling topic's live generations (what a stack creates beside its fixed topics)."""
    return [t for logical in ROLLING_TOPICS for t in generations_of(settings, logical).live(now)]


def stack_topics(settings: RollingSettings, now: float) -> list[str]:
    """Every topic a stack creates at ``now``: the registry's with their dead-letter twins, and the rolling
    topics' live generations."""
    return all_physical_topics(settings.kafka_topic_prefix) + live_topics(settings, now)


def keeper_of(settings: BaseServiceSettings, logical: str) -> GenerationKeeper:
    """The keeper of a rolling topic's generations, waiting for the readers ROLLING_TOPICS names."""
    return GenerationKeeper(
        generations_of(settings, logical),
        bootstrap=settings.kafka_bootstrap_servers,
        partitions=settings.kafka_partitions,
        readers=[f"{settings.kafka_topic_prefix}{reader}" for reader in ROLLING_TOPICS[logical]],
    )


async def keep_generations(settings: BaseServiceSettings, logical: str, stop: asyncio.Event) -> None:
    """Run a rolling topic's keeper until ``stop``: a step a second into each generation (deleting and
    creating together, for one rebalance of the readers) and at least every CHECK_EVERY_S."""
    keeper = keeper_of(settings, logical)
    g = keeper.generations
    if not g.rolling:
        await stop.wait()
        return
    outage = False
    while not stop.is_set():
        try:
            await keeper.step(time.time())
            outage = False
        except (KafkaError, OSError) as exc:  # the broker is away: the next step tries again
            if not outage:
                log.warning("the generations of %s cannot be kept: %s: %s", g.base, type(exc).__name__, exc)
            outage = True
        now = time.time()
        await sleep_or_stop(stop, min(g.start_of(now) + g.every_s + 1.0 - now, CHECK_EVERY_S))
