"""Background work: the deadline and health-check tick, and the telemetry window feed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from libs.common.bus.kafka import create_consumer
from libs.common.events import EVENT_TYPES, EventDecodeError, decode, topics
from libs.common.events.telemetry import SampleBatchV1
from libs.common.runtime import BackgroundTask, ServiceRuntime
from services.recovery.effects import Effects, apply
from services.recovery.incidents import check_deadline, record_health_check
from services.recovery.settings import RecoverySettings
from services.recovery.store import IncidentStore
from services.recovery.window import SampleWindow

__all__ = ["samples_loop", "tick", "tick_loop"]

log = logging.getLogger(__name__)


def _settings(runtime: ServiceRuntime) -> RecoverySettings:
    settings = runtime.settings
    assert isinstance(settings, RecoverySettings)
    return settings


async def tick(runtime: ServiceRuntime, *, now: datetime) -> int:
    """Escalate incidents past their deadline and pass health checks whose settle period ended."""
    s = _settings(runtime)
    fx = Effects(settle=s.settle_timedelta, now=now)
    done = 0
    async with runtime.uow() as uow:
        store = IncidentStore(uow.conn)
        for incident in await store.due_settle(now=now):
            await apply(uow, record_health_check(incident, passed=True, at=now), before=incident, fx=fx)
            done += 1
        for incident in await store.due_deadline(detected_before=now - s.policy.deadline):
            await apply(uow, check_deadline(incident, now=now, policy=s.policy), before=incident, fx=fx)
            done += 1
        await uow.commit()
    return done


def tick_loop(clock: Callable[[], datetime] | None = None) -> BackgroundTask:
    """A background task that ticks every ``tick_s`` until stopped."""
    now = clock or (lambda: datetime.now(UTC))

    async def loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await tick(runtime, now=now())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=_settings(runtime).tick_s)

    return loop


async def samples_loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
    """Feed the telemetry window straight from the samples topic, outside the transactional consumer.

    Samples are the busiest topic and only ever refresh a short window, so this loop writes no inbox
    rows and nothing to Postgres; offsets commit every few seconds (a replayed sample changes nothing
    that matters, a skipped one thins the evidence for one second).
    """
    s = _settings(runtime)
    window = SampleWindow(redis=lambda: runtime.redis, keys=runtime.keys, window_s=s.window_s)
    consumer = create_consumer(
        bootstrap=s.kafka_bootstrap_servers,
        group_id=s.group_id("samples"),
        topics=[s.topic(topics.TELEMETRY_SAMPLES)],
        client_id=f"{s.service_name}.samples",
    )
    await consumer.start()
    try:
        last_commit = 0.0
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=200, max_records=500)
            for records in batches.values():
                for record in records:
                    await _add(window, record.value or b"")
            clock = asyncio.get_running_loop().time()
            if batches and clock - last_commit > 2.0:
                await consumer.commit()
                last_commit = clock
    finally:
        await consumer.stop()


async def _add(window: SampleWindow, value: bytes) -> None:
    try:
        _, payload = decode(value, EVENT_TYPES)
    except EventDecodeError:
        log.warning("undecodable sample batch skipped")
        return
    if isinstance(payload, SampleBatchV1):
        await window.add(payload)
