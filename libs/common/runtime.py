"""A service's process-wide resources and background work, started and stopped together.

One instance per process, built by the service's composition root: the Postgres pool bound to its
schema, Redis, the Kafka producer, the outbox relay, one supervised task per consumer, and any
background loops the service adds. Every service also consumes the platform topic, so it can
authenticate tenants' API keys locally.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from aiokafka import AIOKafkaProducer
from redis.asyncio import Redis

from libs.common.auth.principal import KeyCache
from libs.common.auth.replication import HANDLERS as AUTH_HANDLERS
from libs.common.bus.consumer import ConsumerRunner, RetryPolicy
from libs.common.bus.generations import stack_topics
from libs.common.bus.handlers import Handlers
from libs.common.bus.health import ConsumerHealth
from libs.common.bus.kafka import (
    MAX_EVENT_BYTES,
    create_consumer,
    create_producer,
    ensure_topics,
    wait_for_broker,
)
from libs.common.bus.relay import OutboxRelay
from libs.common.db.migrate import Migration, migrate
from libs.common.db.pool import create_pool, retry_while_unreachable
from libs.common.db.uow import PostgresUnitOfWork
from libs.common.events.topics import PLATFORM
from libs.common.redis import Keyspace, create_redis
from libs.common.settings import BaseServiceSettings
from libs.common.stopping import sleep_or_stop

__all__ = ["BackgroundTask", "ConsumerSpec", "ServiceRuntime"]

log = logging.getLogger(__name__)

#: The platform topic carries tenants and API keys: a few events a day, read by every service. The
#: embedded broker holds each fetch for its whole wait and then walks every partition, so six idle
#: platform consumers at 25 ms cost it 5.9% of a core and at 250 ms 1.4% (measured, 3 partitions). A
#: new key works on the other services up to a quarter second later; revocation already waits for the
#: auth cache (AUTH_CACHE_TTL_S, 5 s).
PLATFORM_FETCH_WAIT_MS = 250
#: Behind a transaction pooler, the direct connections a service may hold: the outbox relay's listening
#: session and one leader's lock (the alerting evaluator's; the placer opens its own session).
SESSION_POOL_MAX = 2


async def _bounded(closing: Awaitable[None], timeout_s: float, what: str) -> bool:
    """Await a close for at most ``timeout_s``; False (and a warning) when it did not finish."""
    try:
        await asyncio.wait_for(closing, timeout=timeout_s)
    except TimeoutError:
        log.warning("%s did not close within %.0fs; abandoned", what, timeout_s)
        return False
    return True


BackgroundTask = Callable[["ServiceRuntime", asyncio.Event], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """One consumer of a service: its name (part of the group id), logical topics and handlers."""

    name: str
    topics: tuple[str, ...]
    handlers: Handlers[Any, Any]
    #: Shortest fetch long-poll for this consumer; the settings' ``KAFKA_FETCH_MAX_WAIT_MS`` when longer.
    min_fetch_wait_ms: int = 0


@dataclass
class ServiceRuntime:
    """Everything a running service holds; ``start`` opens it all, ``stop`` closes it all."""

    settings: BaseServiceSettings
    migrations: Sequence[Migration] = ()
    consumers: Sequence[ConsumerSpec] = ()
    background: Sequence[tuple[str, BackgroundTask]] = ()
    run_relay: bool = True
    _pool: asyncpg.Pool[Any] | None = None
    _session_pool: asyncpg.Pool[Any] | None = None
    _redis: Redis | None = None
    _producer: AIOKafkaProducer | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    runners: dict[str, ConsumerRunner] = field(default_factory=dict)
    #: Each consumer's failures, kept across its runner's restarts (readiness reads them).
    consumer_health: dict[str, ConsumerHealth] = field(default_factory=dict)
    #: Recently verified API keys (see ``KeyCache``), kept for ``AUTH_CACHE_TTL_S``.
    key_cache: KeyCache = field(init=False)

    def __post_init__(self) -> None:
        self.key_cache = KeyCache(ttl_s=self.settings.auth_cache_ttl_s)

    @property
    def pool(self) -> asyncpg.Pool[Any]:
        """The Postgres pool (search_path = this service's schema)."""
        if self._pool is None:
            raise RuntimeError("runtime not started")
        return self._pool

    @property
    def session_pool(self) -> asyncpg.Pool[Any]:
        """Connections for what keeps session state (LISTEN, a session advisory lock): ``pool`` itself,
        or, behind a transaction pooler (``DATABASE_POOLER=transaction``), a small pool on
        ``DATABASE_DIRECT_URL``."""
        if self._session_pool is None:
            raise RuntimeError("runtime not started")
        return self._session_pool

    @property
    def redis(self) -> Redis:
        """The Redis client."""
        if self._redis is None:
            raise RuntimeError("runtime not started")
        return self._redis

    @property
    def producer(self) -> AIOKafkaProducer:
        """The Kafka producer (used by the relay and the DLQ)."""
        if self._producer is None:
            raise RuntimeError("runtime not started")
        return self._producer

    @property
    def keys(self) -> Keyspace:
        """This service's Redis namespace."""
        return Keyspace(self.settings.redis_prefix).child(self.settings.service_name)

    def uow(self) -> PostgresUnitOfWork:
        """A new unit of work on this service's schema."""
        return PostgresUnitOfWork(pool=self.pool, source=self.settings.service_name)

    async def start(self) -> None:
        """Migrate, connect, create topics, then start the relay, consumers and background tasks."""
        s, wait_s = self.settings, self.settings.startup_connect_timeout_s
        if self.migrations:
            await retry_while_unreachable(
                lambda: migrate(
                    dsn=s.session_database_url, schema=s.pg_schema, migrations=list(self.migrations)
                ),
                what="Postgres",
                timeout_s=wait_s,
            )
        self._pool = await retry_while_unreachable(
            lambda: create_pool(
                dsn=s.service_database_url,
                schema=s.pg_schema,
                max_size=s.db_pool_max,
                pooled=s.pooled,
            ),
            what="Postgres",
            timeout_s=wait_s,
        )
        self._session_pool = self._pool
        if s.pooled:
            # The relay's listening connection and one leader's lock at most (SESSION_POOL_MAX).
            self._session_pool = await retry_while_unreachable(
                lambda: create_pool(
                    dsn=s.session_database_url, schema=s.pg_schema, max_size=SESSION_POOL_MAX, min_size=0
                ),
                what="Postgres (direct)",
                timeout_s=wait_s,
            )
        self._redis = create_redis(s.redis_url)  # connects lazily; /readyz reports it
        await wait_for_broker(bootstrap=s.kafka_bootstrap_servers, timeout_s=wait_s)
        await self._recreate_topics()
        # Its senders are the relay, which sends each batch's records in one go and then waits for
        # their acks, and dead-lettering, which waits for each: lingering would only add to every batch.
        self._producer = create_producer(
            bootstrap=s.kafka_bootstrap_servers,
            client_id=s.service_name,
            linger_ms=0,
            max_record_bytes=MAX_EVENT_BYTES,  # a larger event is parked by the relay (bus/relay.py)
        )
        await self._producer.start()
        self._stop.clear()
        if self.run_relay:
            self._spawn("relay", self._run_relay)
        for spec in (
            ConsumerSpec("platform", (PLATFORM,), AUTH_HANDLERS, PLATFORM_FETCH_WAIT_MS),
            *self.consumers,
        ):
            self._spawn(f"consumer:{spec.name}", self._consumer_loop(spec))
        for name, task in self.background:
            self._spawn(name, self._bind(task))

    async def stop(self, *, timeout_s: float = 10.0) -> None:
        """Stop background work (consumers leave their groups), then close connections.

        Bounded whatever the dependencies do: background work gets ``timeout_s`` and is then cancelled, and
        each connection gets ``timeout_s`` to close. A producer that cannot reach the broker is abandoned
        with nothing lost: what the relay had not marked sent stays in the outbox for the next start.
        """
        self._stop.set()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self._tasks.clear()
        if self._producer is not None:
            await _bounded(self._producer.stop(), timeout_s, "Kafka producer")
        if self._redis is not None:
            await _bounded(self._redis.aclose(), timeout_s, "Redis client")
        session = self._session_pool if self._session_pool is not self._pool else None
        if session is not None and not await _bounded(session.close(), timeout_s, "Postgres session pool"):
            session.terminate()
        if self._pool is not None and not await _bounded(self._pool.close(), timeout_s, "Postgres pool"):
            self._pool.terminate()
        self._producer = self._redis = self._pool = self._session_pool = None

    async def readiness(self) -> dict[str, str]:
        """'ok' or the error for each dependency: postgres, redis, kafka; and ``consumer:<name>`` for each
        consumer that has failed to apply or commit for longer than ``consumer_stall_s``."""
        checks: dict[str, str] = {}
        for name, probe in (
            ("postgres", self._check_pg),
            ("redis", self._check_redis),
            ("kafka", self._check_kafka),
        ):
            try:
                await asyncio.wait_for(probe(), timeout=2.0)
                checks[name] = "ok"
            except Exception as exc:
                checks[name] = f"{type(exc).__name__}: {exc}"
        checks.update(self.stalled_consumers())
        return checks

    def stalled_consumers(self) -> dict[str, str]:
        """``consumer:<name>`` -> why, for each consumer not applying events for longer than the bound."""
        bound_s = self.settings.consumer_stall_s
        found = {name: health.stalled(bound_s=bound_s) for name, health in self.consumer_health.items()}
        return {f"consumer:{name}": why for name, why in found.items() if why is not None}

    async def _recreate_topics(self, topics: Sequence[str] | None = None) -> Sequence[str]:
        """Create those of ``topics`` (default: ``stack_topics``, every topic of the stack) the broker has not
        got."""
        s = self.settings
        return await ensure_topics(
            bootstrap=s.kafka_bootstrap_servers,
            topics=stack_topics(s, time.time()) if topics is None else topics,
            partitions=s.kafka_partitions,
        )

    async def _check_pg(self) -> None:
        await self.pool.fetchval("SELECT 1")

    async def _check_redis(self) -> None:
        await self.redis.ping()

    async def _check_kafka(self) -> None:
        await self.producer.client.fetch_all_metadata()

    def _spawn(self, name: str, factory: Callable[[], Awaitable[None]]) -> None:
        self._tasks.append(asyncio.create_task(self._supervise(name, factory), name=name))

    def _bind(self, task: BackgroundTask) -> Callable[[], Awaitable[None]]:
        return lambda: task(self, self._stop)

    async def _supervise(self, name: str, factory: Callable[[], Awaitable[None]]) -> None:
        """Run a loop until stop; if it crashes, log and restart it after a backoff."""
        backoff = 0.5
        while not self._stop.is_set():
            try:
                await factory()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s crashed; restarting in %.1fs", name, backoff)
                await sleep_or_stop(self._stop, backoff)
                backoff = min(backoff * 2, 10.0)

    async def _run_relay(self) -> None:
        s = self.settings
        relay = OutboxRelay(
            pool=self.pool,
            session_pool=self.session_pool,
            producer=self.producer,
            service=s.service_name,
            schema=s.pg_schema,
            topic_prefix=s.kafka_topic_prefix,
            batch_size=s.outbox_batch_size,
            poll_interval_s=s.outbox_poll_interval_s,
            recreate_topics=self._recreate_topics,
        )
        await relay.run(self._stop)

    def _consumer_loop(self, spec: ConsumerSpec) -> Callable[[], Awaitable[None]]:
        health = self.consumer_health.setdefault(spec.name, ConsumerHealth())

        async def loop() -> None:
            try:
                await run()
            except Exception as exc:  # the supervisor restarts it; readiness counts from the first failure
                health.failed(f"{type(exc).__name__}: {exc}")
                raise

        async def run() -> None:
            s = self.settings
            consumer = create_consumer(
                bootstrap=s.kafka_bootstrap_servers,
                group_id=s.group_id(spec.name),
                topics=[s.topic(t) for t in spec.topics],
                client_id=f"{s.service_name}.{spec.name}",
                fetch_max_wait_ms=max(s.kafka_fetch_max_wait_ms, spec.min_fetch_wait_ms),
            )
            await consumer.start()
            runner = ConsumerRunner(
                name=spec.name,
                service=s.service_name,
                consumer=consumer,
                producer=self.producer,
                uow_factory=lambda: spec.handlers.unit_of_work(pool=self.pool, source=s.service_name),
                handlers=spec.handlers,
                topic_prefix=s.kafka_topic_prefix,
                retry=RetryPolicy(
                    max_attempts=s.consumer_max_attempts,
                    base_s=s.consumer_backoff_s,
                    max_s=s.consumer_backoff_max_s,
                ),
                health=health,
                recreate_topics=self._recreate_topics,
            )
            self.runners[spec.name] = runner
            try:
                await runner.run(self._stop)
            finally:
                await consumer.stop()

        return loop
