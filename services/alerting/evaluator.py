"""The evaluator loop: samples from Kafka, signals and ticks into the engine; transitions into Postgres.

One evaluator runs at a time (a Postgres advisory lock; other replicas wait as standbys). It loads
the persisted state, consumes `telemetry.samples` with a raw consumer, evaluates in memory and, per
fetched batch, writes only what changed (series rows, groups, alert history, outbox events,
notifications) in one transaction, then commits the Kafka offsets. A crash before the offset commit
replays samples: those at or before a series' persisted instant are skipped, the others replay
deterministically into the same state, and notification ids are deterministic and inserted
ON CONFLICT DO NOTHING, so nobody is paged twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import asyncpg
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.errors import KafkaError
from prometheus_client import Counter, Gauge
from pydantic import BaseModel, ConfigDict, ValidationError

from libs.common.bus.kafka import create_consumer
from libs.common.db.locks import advisory_lock_holder
from libs.common.db.uow import UnitOfWork
from libs.common.events import EVENT_TYPES, EventDecodeError, decode, topics
from libs.common.events.alerting import AlertFiredV1, AlertResolvedV1
from libs.common.events.telemetry import SampleBatchV1
from libs.common.runtime import ServiceRuntime
from services.alerting.engine import Changes, Engine
from services.alerting.samples import derive
from services.alerting.settings import AlertingSettings
from services.alerting.state import EvaluationConfig, Transition, TransitionKind
from services.alerting.statestore import StateStore
from services.alerting.store import ConfigStore, default_tree
from services.alerting.wire import FieldChecks, WireBatch, decode_plain, field_checks

__all__ = ["Evaluator", "LeadershipLost"]

log = logging.getLogger(__name__)

SAMPLES_EVALUATED = Counter("gpucloud_alerting_samples_evaluated_total", "GPU samples evaluated.")
EVALUATION_LAG = Gauge(
    "gpucloud_alerting_evaluation_lag_seconds", "Age of the newest sample batch when it was evaluated."
)
TRANSITIONS = Counter("gpucloud_alerting_transitions_total", "Alert state transitions.", ["kind"])

# Records evaluated between two looks at the timers and two yields to the event loop (delivery, API):
# a fetch of 2,000 records is a few hundred milliseconds of CPU, a slice a few tens.
SLICE_RECORDS = 200
# Longest wait for records when idle (then timers advance). Not shortened when a timer is due: after
# a restart the replayed samples, not a tick racing them, say when a restored pending alert fired.
IDLE_WAIT_MS = 50
# A cut network leaves a statement waiting for TCP to give up (minutes), while the lock, ended by the
# server's keepalive, may be a standby's already: an unanswered check steps down.
LOCK_CHECK_TIMEOUT_S = 5.0


class LeadershipLost(RuntimeError):
    """The evaluator's lock session ended: another replica may be evaluating now."""


class Evaluator:
    """Background task; `evaluated` counts samples for tests and the benchmark."""

    def __init__(self, *, settings: AlertingSettings, on_notified: Callable[[], None]) -> None:
        self._settings = settings
        self._on_notified = on_notified
        self.evaluated = 0
        self.leading = False
        self.rule_names: frozenset[str] = frozenset()
        self._version = -1
        self._last_tick = 0.0
        self._checks_for: frozenset[str] | None = None
        self._checks: FieldChecks = ()
        self._lock_conn: asyncpg.Connection[Any] | None = None
        self._lock_key, self._lock_pid = "", 0

    async def run(self, runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        """Wait to become the evaluator, then evaluate until `stop` or until the lock is lost."""
        lock = f"gpucloud.alerting.evaluator.{self._settings.pg_schema}"
        async with runtime.pool.acquire() as conn:
            while not await conn.fetchval("SELECT pg_try_advisory_lock(hashtext($1))", lock):
                if stop.is_set():
                    return
                await asyncio.sleep(1.0)
            try:
                self.leading, self._lock_conn = True, conn
                self._lock_key, self._lock_pid = lock, conn.get_server_pid()
                await self._lead(runtime, stop)
            finally:
                self.leading, self._lock_conn = False, None
                if not conn.is_closed():
                    with contextlib.suppress(
                        OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError
                    ):
                        await conn.execute(
                            "SELECT pg_advisory_unlock(hashtext($1))", lock, timeout=LOCK_CHECK_TIMEOUT_S
                        )

    async def _confirm_lock(self) -> None:
        """Raise LeadershipLost once the lock's session is gone.

        The lock lives as long as its session: a terminated backend, a restarted Postgres or a cut
        network ends both, and a standby takes the lock within a second. An evaluator that went on
        would consume beside it, each with part of the partitions, and page for the nodes it no
        longer hears from. One statement on the session every tick settles it.
        """
        conn = self._lock_conn
        try:
            if conn is None or conn.is_closed():
                raise LeadershipLost("the evaluator's lock connection is closed")
            await conn.execute("SELECT 1", timeout=LOCK_CHECK_TIMEOUT_S)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise LeadershipLost(f"the evaluator's lock session is gone: {exc!r}") from exc

    async def _lead(self, runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        s = self._settings
        engine = Engine(
            tree=default_tree(s.default_receiver),
            config=EvaluationConfig(staleness=timedelta(seconds=s.staleness_s)),
            event_ttl=timedelta(seconds=s.event_alert_ttl_s),
        )
        async with runtime.uow() as uow:
            await ConfigStore(uow.conn).seed_defaults()
            await uow.commit()
        self._version = await self._reload(runtime, engine, version=-1)
        async with runtime.pool.acquire() as conn:
            restored = await StateStore(conn).load()
        engine.restore(
            series=restored.series,
            nodes=restored.nodes,
            events=restored.events,
            groups=restored.groups,
            now=_now(),
        )
        consumer = create_consumer(
            bootstrap=s.kafka_bootstrap_servers,
            group_id=s.group_id("samples"),
            topics=[s.topic(topics.TELEMETRY_SAMPLES)],
            client_id=f"{s.service_name}.samples",
        )
        await consumer.start()
        try:
            self._last_tick = committed_at = 0.0
            uncommitted = False
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=IDLE_WAIT_MS, max_records=2000)
                records = [record for part in batches.values() for record in part]
                # Evaluate in slices; after each, due `for` timers fire and what changed is committed
                # (which wakes the delivery worker), then the loop yields so delivery runs promptly.
                for start in range(0, len(records), SLICE_RECORDS):
                    self._observe(engine, records[start : start + SLICE_RECORDS])
                    await self._step(runtime, engine)
                    await asyncio.sleep(0)
                if not records:
                    await self._step(runtime, engine)
                uncommitted = uncommitted or bool(records)
                # Also once the stream goes quiet: the last records are committed, not left to replay.
                if uncommitted and time.monotonic() - committed_at >= s.offset_commit_interval_s:
                    # Committing less often only widens what a crash replays; replays are idempotent.
                    await consumer.commit()
                    committed_at, uncommitted = time.monotonic(), False
            # Reached on a clean stop only: every fetched record is evaluated and persisted. After an
            # error (the lock lost mid-batch, a failed write) the last fetch may be only partly so: its
            # offsets stay uncommitted, and whoever evaluates next replays it.
            await _commit_quietly(consumer)
        finally:
            await consumer.stop()

    async def _step(self, runtime: ServiceRuntime, engine: Engine) -> None:
        """Every tick interval: reload configuration, take signals, tick; otherwise fire due timers."""
        signal_ids: list[int] = []
        if time.monotonic() - self._last_tick >= self._settings.tick_interval_s:
            self._last_tick = time.monotonic()
            await self._confirm_lock()
            self._version = await self._reload(runtime, engine, version=self._version)
            signal_ids = await self._signals(runtime, engine)
            engine.tick(now=_now())
        else:
            engine.advance(now=_now())
        await self._persist(runtime, engine.drain(), signal_ids)

    def _observe(self, engine: Engine, records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        if self._checks_for is not engine.metrics:
            self._checks_for, self._checks = engine.metrics, field_checks(engine.metrics)
        now, done, newest = _now(), 0, None
        for record in records:
            batch = _sample_batch(record, self._checks)
            if batch is None:
                continue
            done += engine.observe_readings(node=batch.node, at=batch.at, readings=batch.readings, now=now)
            newest = batch.at
        self.evaluated += done
        SAMPLES_EVALUATED.inc(done)
        if newest is not None:
            EVALUATION_LAG.set((now - newest).total_seconds())

    async def _reload(self, runtime: ServiceRuntime, engine: Engine, *, version: int) -> int:
        async with runtime.pool.acquire() as conn:
            store = ConfigStore(conn)
            if await store.version() == version:
                return version
            now = _now()
            snap = await store.snapshot(default_receiver=self._settings.default_receiver, now=now)
        engine.configure(rules=snap.rules, tree=snap.tree, silences=snap.silences, now=now)
        self.rule_names = frozenset(r.name for r in snap.rules)
        log.info("evaluating %d rules (configuration version %d)", len(snap.rules), snap.version)
        return snap.version

    async def _signals(self, runtime: ServiceRuntime, engine: Engine) -> list[int]:
        async with runtime.pool.acquire() as conn:
            taken = await StateStore(conn).take_signals()
        now = _now()
        for _, signal in taken:
            engine.signal(signal, now=now)
        return [signal_id for signal_id, _ in taken]

    async def _persist(self, runtime: ServiceRuntime, changes: Changes, signal_ids: list[int]) -> None:
        if changes.empty() and not changes.notifications and not signal_ids:
            return
        async with runtime.uow() as uow:
            # The fence: written only while this evaluator's session still holds the lock. Between two
            # ticks' checks a successor may have taken it and loaded the state; this keeps it the only writer.
            if await advisory_lock_holder(uow.conn, self._lock_key) != self._lock_pid:
                raise LeadershipLost("the evaluator's lock is no longer its session's: nothing written")
            store = StateStore(uow.conn)
            new = await store.save(changes)
            for change in changes.transitions:
                await _emit(uow, change)
            await store.done_signals(signal_ids)
            await uow.commit()
        for change in changes.transitions:
            TRANSITIONS.labels(change.kind.value).inc()
        if new:
            self._on_notified()


async def _emit(uow: UnitOfWork, change: Transition) -> None:
    alert, tenant = change.alert, change.alert.labels.get("tenant")
    severity = alert.labels.get("severity", "warning")
    if change.kind is TransitionKind.FIRING:
        fired = AlertFiredV1(
            fingerprint=alert.fingerprint,
            rule=change.rule,
            severity=severity,
            labels=alert.labels,
            tenant_id=tenant,
            starts_at=alert.starts_at,
            value=alert.value,
            summary=alert.annotations.get("summary", ""),
        )
        await uow.emit(fired, tenant=tenant)
    elif change.kind is TransitionKind.RESOLVED:
        resolved = AlertResolvedV1(
            fingerprint=alert.fingerprint,
            rule=change.rule,
            severity=severity,
            labels=alert.labels,
            tenant_id=tenant,
            ends_at=change.at,
        )
        await uow.emit(resolved, tenant=tenant)


async def _commit_quietly(consumer: AIOKafkaConsumer) -> None:
    try:
        await consumer.commit()
    except KafkaError as exc:  # leaving a group mid-rebalance: the next owner replays, idempotently
        log.info("final offset commit skipped: %s", exc)


class _SampleEnvelope(BaseModel):
    """The envelope with its payload typed, so a sample batch is parsed in one pass (hot path)."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["telemetry.samples.batch.v1"]
    data: SampleBatchV1


def _sample_batch(record: ConsumerRecord[bytes, bytes], checks: FieldChecks) -> WireBatch | None:
    raw = record.value or b""
    fast = decode_plain(raw, checks)
    if fast is not None:
        return fast
    # Not a plainly well-formed sample batch: another event type on the topic (rollups), or a record
    # the models must judge (coercions, or invalid: the general decoder says why).
    try:
        batch = _SampleEnvelope.model_validate_json(raw).data
    except ValidationError:
        try:
            _, payload = decode(raw, EVENT_TYPES)
        except EventDecodeError as exc:
            log.warning("skipping undecodable sample record at offset %s: %s", record.offset, exc)
            return None
        if not isinstance(payload, SampleBatchV1):
            return None
        batch = payload
    return WireBatch(batch.node, batch.at, [derive(s.model_dump()) for s in batch.samples])


def _now() -> datetime:
    return datetime.now(UTC)
