"""The evaluator loop: samples from Kafka, signals and ticks into the engine; transitions into Postgres.

One evaluator runs at a time (a lease on a Postgres advisory lock, libs.common.db.leadership; other
replicas wait as standbys). It loads the persisted state, reads `telemetry.samples` as a side stream
(libs.common.bus.side_stream: no inbox rows), evaluates in memory and, per fetched batch, writes
only what changed (series rows, groups, alert history, outbox events, notifications) in one
transaction, then commits the Kafka offsets. A crash before the offset commit
replays samples: those at or before a series' persisted instant are skipped, the others replay
deterministically into the same state, and notification ids are deterministic and inserted
ON CONFLICT DO NOTHING, so nobody is paged twice.

Prometheus-mode groups (domain/prometheus_mode.py) are fed the same batches and evaluated on their
grid after each slice; their transitions go through the engine's routing and the same transaction.
Their series and pending alerts live in memory only: a new evaluator takes their firing alerts back
from the persisted groups (so they resolve), and their pending ones start over.

Pending alerts are also listed for the API (table pending_alerts), in the transaction of the transition
that made or ended them; a new evaluator rewrites that list from the state it restored.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

from prometheus_client import Counter, Gauge

from libs.common.bus.kafka import DEFAULT_FETCH_MAX_WAIT_MS
from libs.common.bus.side_stream import CommitCadence, Poll, SideStream, side_stream_consumer
from libs.common.db.leadership import LeadershipLost, Lease, lead
from libs.common.db.uow import UnitOfWork
from libs.common.events import EventDecodeError, topics
from libs.common.events.alerting import AlertFiredV1, AlertResolvedV1
from libs.common.events.sample_wire import (
    FieldChecks,
    WireBatch,
    decode_sample_batch,
    decode_sample_batch_models,
)
from libs.common.runtime import ServiceRuntime
from libs.common.stopping import sleep_or_stop
from services.alerting.adapters.config_store import ConfigStore, default_tree
from services.alerting.adapters.engine_state_store import StateStore
from services.alerting.domain.alert_lifecycle import EvaluationConfig, Transition, TransitionKind
from services.alerting.domain.engine import Changes, Engine
from services.alerting.domain.prometheus_mode import PrometheusMode
from services.alerting.domain.rules import EvaluationMode
from services.alerting.domain.samples import derive, reading_fields
from services.alerting.service.unit_of_work import alerting_uow

__all__ = ["Evaluator", "LeadershipLost", "in_time_order", "plain_readings", "reading_checks"]

log = logging.getLogger(__name__)

SAMPLES_EVALUATED = Counter("gpucloud_alerting_samples_evaluated_total", "GPU samples evaluated.")
EVALUATION_LAG = Gauge(
    "gpucloud_alerting_evaluation_lag_seconds", "Age of the newest sample batch when it was evaluated."
)
TRANSITIONS = Counter("gpucloud_alerting_transitions_total", "Alert state transitions.", ["kind"])

# Records evaluated (on a worker thread) between two looks at the timers and two commits: a fetch of
# 2,000 records is a few hundred milliseconds of CPU, a slice under ten; a page waits for its slice.
SLICE_RECORDS = 40
# Longest wait for records when idle (then timers advance). Not shortened when a timer is due: after
# a restart the replayed samples, not a tick racing them, say when a restored pending alert fired.
IDLE_WAIT_MS = 50
#: Records per poll (evaluated in slices of SLICE_RECORDS).
POLL_RECORDS = 2000
#: How often a standby tries the lock.
STANDBY_RETRY_S = 1.0


class SampleRecord(Protocol):
    """What the evaluator reads of a consumed record (aiokafka's ConsumerRecord has it)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def value(self) -> bytes | None: ...


_R = TypeVar("_R", bound=SampleRecord)


class EvaluatorSettings(Protocol):
    """What the evaluator reads of the service's settings (the wiring passes AlertingSettings)."""

    @property
    def pg_schema(self) -> str: ...

    @property
    def default_receiver(self) -> str: ...

    @property
    def staleness_s(self) -> float: ...

    @property
    def event_alert_ttl_s(self) -> float: ...

    @property
    def tick_interval_s(self) -> float: ...

    @property
    def offset_commit_interval_s(self) -> float: ...


class Evaluator:
    """Background task; `evaluated` counts samples for tests and the benchmark."""

    def __init__(self, *, settings: EvaluatorSettings, on_notified: Callable[[], Awaitable[None]]) -> None:
        self._settings = settings
        self._on_notified = on_notified
        self.evaluated = 0
        self.leading = False
        self.rule_names: frozenset[str] = frozenset()
        self._version = -1
        self._last_tick = 0.0
        self._checks_for: frozenset[str] | None = None
        self._checks = FieldChecks()
        self._lock_key = f"gpucloud.alerting.evaluator.{settings.pg_schema}"
        self._lease: Lease | None = None
        self.prometheus = PrometheusMode()  # the prometheus-mode groups (replaced at each lead)

    async def run(self, runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        """Wait to become the evaluator, then evaluate until `stop` or until the lock is lost."""
        stand_by = lambda: sleep_or_stop(stop, STANDBY_RETRY_S)  # noqa: E731  # the wait between two tries
        async with (
            runtime.session_pool.acquire() as conn,
            lead(conn, key=self._lock_key, stop=stop, wait=stand_by) as lease,
        ):
            if lease is None:
                return
            try:
                self._lease, self.leading = lease, True
                await self._lead(runtime, stop)
            finally:
                self._lease, self.leading = None, False

    async def _confirm_lock(self) -> None:
        """Raise LeadershipLost once the lock's session is gone.

        The lock lives as long as its session: a terminated backend, a restarted Postgres or a cut
        network ends both, and a standby takes the lock within a second. An evaluator that went on
        would consume beside it, each with part of the partitions, and page for the nodes it no
        longer hears from. One statement on the session every tick settles it.
        """
        await self._held().confirm()

    def _held(self) -> Lease:
        if self._lease is None:
            raise LeadershipLost("the evaluator holds no lease on its lock")
        return self._lease

    async def _lead(self, runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        s = self._settings
        engine = Engine(
            tree=default_tree(s.default_receiver),
            config=EvaluationConfig(staleness=timedelta(seconds=s.staleness_s)),
            event_ttl=timedelta(seconds=s.event_alert_ttl_s),
        )
        async with alerting_uow(runtime) as uow:
            await uow.config.seed_defaults()
            await uow.commit()
        self.prometheus = PrometheusMode()
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
        self.prometheus.restore(engine.firing.values())
        await self._list_pending(runtime, engine)
        consumer = side_stream_consumer(
            runtime.settings,
            name="samples",
            topic=topics.TELEMETRY_SAMPLES,
            fetch_max_wait_ms=DEFAULT_FETCH_MAX_WAIT_MS,  # what the evaluator always used
        )
        # Committing less often only widens what a crash replays; replays are idempotent. After an
        # error (the lock lost mid-batch, a failed write) the last poll may be only partly persisted:
        # the stream commits nothing more, and whoever evaluates next replays it.
        stream = SideStream(
            consumer=consumer,
            cadence=CommitCadence(every_s=s.offset_commit_interval_s),
            poll_timeout_ms=IDLE_WAIT_MS,
            max_records=POLL_RECORDS,
        )
        self._last_tick = 0.0

        async def handle(poll: Poll) -> None:
            await self._evaluate(runtime, engine, in_time_order(poll.values()))

        await stream.run(stop, handle)

    async def _list_pending(self, runtime: ServiceRuntime, engine: Engine) -> None:
        """Take over the pending-alert list: the pending alerts restored with the series stay (their timers
        go on), the others go (prometheus mode's start over; a predecessor's last ones are unknown)."""
        async with alerting_uow(runtime) as uow:
            await self._held().fence(uow.conn)
            await uow.state.replace_pending(engine.pending(now=_now()))
            await uow.commit()

    async def _evaluate(
        self, runtime: ServiceRuntime, engine: Engine, records: Sequence[SampleRecord]
    ) -> None:
        """One poll, in slices: after each, due `for` timers fire and what changed is committed (which
        hands over to the delivery worker)."""
        for start in range(0, len(records), SLICE_RECORDS):
            # Off the event loop: the loop's delivery and API wait at most the interpreter's switch
            # interval (5 ms) for the CPU a slice takes, not the whole slice at each of their steps.
            part = records[start : start + SLICE_RECORDS]
            await asyncio.to_thread(self._observe, engine, self.prometheus, part)
            await self._step(runtime, engine)
        if not records:
            await self._step(runtime, engine)

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
        now = _now()
        engine.apply(self.prometheus.evaluate(now), now=now)  # groups whose grid time has come
        for name, error in self.prometheus.new_errors():
            log.warning(
                "prometheus-mode rule %s did not evaluate (it changes nothing until it does): %s", name, error
            )
        await self._persist(runtime, engine.drain(), signal_ids)

    def _observe(self, engine: Engine, prometheus: PrometheusMode, records: Sequence[SampleRecord]) -> None:
        """Feed one slice to this lead's engine and prometheus-mode groups (on a worker thread)."""
        metrics = engine.metrics | prometheus.fields
        if self._checks_for != metrics:
            self._checks_for, self._checks = metrics, reading_checks(metrics)
        now, done, newest = _now(), 0, None
        for record in records:
            batch = _sample_batch(record, self._checks)
            if batch is None:
                continue
            done += engine.observe_readings(node=batch.node, at=batch.at, readings=batch.samples, now=now)
            prometheus.observe_readings(node=batch.node, at=batch.at, readings=batch.samples)
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
        engine.configure(
            rules=snap.rules,
            tree=snap.tree,
            silences=snap.silences,
            inhibit_rules=snap.inhibit_rules,
            now=now,
        )
        self.prometheus.configure([r for r in snap.rules if r.mode is EvaluationMode.PROMETHEUS])
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
        async with alerting_uow(runtime) as uow:
            # The fence: written only while this evaluator's session still holds the lock. Between two
            # ticks' checks a successor may have taken it and loaded the state; this keeps it the only writer.
            await self._held().fence(uow.conn)
            store = uow.state
            new = await store.save(changes)
            for change in changes.transitions:
                await _emit(uow, change)
            await store.done_signals(signal_ids)
            await uow.commit()
        for change in changes.transitions:
            TRANSITIONS.labels(change.kind.value).inc()
        if new:
            await self._on_notified()  # the delivery worker sends them before the next slice is evaluated


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


def in_time_order(parts: Iterable[Sequence[_R]]) -> list[_R]:
    """A poll's records, its partitions merged by the records' timestamps, each partition's order kept
    (a node's batches stay in order). Partition after partition, a batch published first in a second
    waited behind every batch of the partitions before its own: hundreds of milliseconds at 10,000 GPUs."""
    return list(heapq.merge(*parts, key=lambda record: record.timestamp))


def reading_checks(metrics: Collection[str]) -> FieldChecks:
    """The exact-JSON-type checks of the wire fields that the rules' ``metrics`` are read from."""
    return FieldChecks.of_metrics(reading_fields(metrics))


def plain_readings(raw: bytes, checks: FieldChecks) -> WireBatch | None:
    """A sample batch read with plain `json` (readings `derive`d), or None: let the models judge it."""
    batch = decode_sample_batch(raw, checks=checks, keep_texts=False)
    if batch is not None:
        for reading in batch.samples:
            derive(reading)
    return batch


def _sample_batch(record: SampleRecord, checks: FieldChecks) -> WireBatch | None:
    raw = record.value or b""
    fast = plain_readings(raw, checks)
    if fast is not None:
        return fast
    # Not a plainly well-formed sample batch: another event type on the topic (rollups), or a record
    # the models must judge (coercions, or invalid: the general decoder says why).
    try:
        batch = decode_sample_batch_models(raw)
    except EventDecodeError as exc:
        log.warning("skipping undecodable sample record at offset %s: %s", record.offset, exc)
        return None
    if batch is not None:
        for reading in batch.samples:
            derive(reading)
    return batch


def _now() -> datetime:
    return datetime.now(UTC)
