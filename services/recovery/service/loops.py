"""Background work: the deadline and health-check tick, and the telemetry window feed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from libs.common.bus.kafka import DEFAULT_FETCH_MAX_WAIT_MS
from libs.common.bus.side_stream import CommitCadence, Poll, SideStream, side_stream_consumer
from libs.common.events import EventDecodeError, topics
from libs.common.events.sample_wire import (
    FieldChecks,
    WireBatch,
    decode_sample_batch,
    decode_sample_batch_models,
)
from libs.common.runtime import BackgroundTask, ServiceRuntime
from libs.common.stopping import sleep_or_stop
from services.recovery.adapters.sample_window import WINDOW_FIELDS, SampleWindow
from services.recovery.domain.health import HealthCheck, HealthVerdict, judge_health
from services.recovery.domain.incidents import (
    Incident,
    IncidentState,
    check_deadline,
    drains_node,
    record_health_check,
    verifying_since,
)
from services.recovery.service.config import RecoveryConfig
from services.recovery.service.effects import Effects, apply
from services.recovery.service.unit_of_work import RecoveryUnitOfWork, recovery_uow

__all__ = ["health_check", "samples_loop", "tick", "tick_in", "tick_loop"]

log = logging.getLogger(__name__)

#: What the window computes with, read as the models would read it; anything else goes to the models.
WINDOW_CHECKS = FieldChecks.of_metrics(WINDOW_FIELDS)


def _settings(runtime: ServiceRuntime) -> RecoveryConfig:
    settings = runtime.settings
    assert isinstance(settings, RecoveryConfig)
    return settings


async def health_check(incident: Incident, *, window: SampleWindow | None) -> HealthCheck:
    """Judge a verifying incident's GPU (or its node's GPUs) by the readings taken after the action.

    Without a window (RECOVERY_CONSUME_SAMPLES=false: stand-ins that send no samples) there are no
    readings, and the check passes once the settle period went by without a new fault.
    """
    if window is None:
        return HealthCheck(verdict=HealthVerdict.PASSED, detail="no readings kept: settle period only")
    since = verifying_since(incident)
    if since is None:
        return HealthCheck(verdict=HealthVerdict.NO_READING, detail="no reset or reboot asked for")
    gpus = [incident.gpu] if incident.gpu is not None else []
    if drains_node(incident):
        gpus = sorted({*gpus, *await window.node_gpus(incident.node)})
    return judge_health(gpus=gpus, readings=await window.readings(gpus), after=since)


async def tick(runtime: ServiceRuntime, *, now: datetime, window: SampleWindow | None = None) -> int:
    """Escalate incidents past their deadline and pass health checks whose settle period ended.

    A health check passes only on readings taken after the reset or reboot (see health_check); one that
    does not pass leaves the incident verifying, looked at again every tick until its deadline.
    Returns how many incidents changed.
    """
    async with recovery_uow(runtime) as uow:
        done = await tick_in(uow, config=_settings(runtime), now=now, window=window)
        await uow.commit()
    return done


async def tick_in(
    uow: RecoveryUnitOfWork, *, config: RecoveryConfig, now: datetime, window: SampleWindow | None = None
) -> int:
    """One tick's work (see ``tick``) inside an open unit of work, which the caller commits."""
    fx = Effects(settle=config.settle_timedelta, now=now)
    done = 0
    store = uow.incidents
    for incident in await store.due_settle(now=now):
        if (await health_check(incident, window=window)).passed:
            await apply(uow, record_health_check(incident, passed=True, at=now), before=incident, fx=fx)
            done += 1
    for incident in await store.due_deadline(detected_before=now - config.policy.deadline):
        detail = ""
        if incident.state is IncidentState.VERIFYING:
            detail = (await health_check(incident, window=window)).detail
        transition = check_deadline(incident, now=now, policy=config.policy, detail=detail)
        await apply(uow, transition, before=incident, fx=fx)
        done += not transition.ignored
    return done


def tick_loop(
    clock: Callable[[], datetime] | None = None, *, window: SampleWindow | None = None
) -> BackgroundTask:
    """A background task that ticks every ``tick_s`` until stopped; window holds the health readings."""
    now = clock or (lambda: datetime.now(UTC))

    async def loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await tick(runtime, now=now(), window=window)
            await sleep_or_stop(stop, _settings(runtime).tick_s)

    return loop


async def samples_loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
    """Feed the telemetry window straight from the samples topic, outside the transactional consumer.

    Samples are the busiest topic and only ever refresh a short window, so this loop writes no inbox
    rows and nothing to Postgres; offsets commit every few seconds (a replayed sample changes nothing
    that matters, a skipped one thins the evidence for one second).
    """
    s = _settings(runtime)
    window = SampleWindow(redis=lambda: runtime.redis, keys=runtime.keys, window_s=s.window_s)
    consumer = side_stream_consumer(
        runtime.settings,
        name="samples",
        topic=topics.TELEMETRY_SAMPLES,
        fetch_max_wait_ms=DEFAULT_FETCH_MAX_WAIT_MS,  # what this reader always used
    )

    async def handle(poll: Poll) -> None:  # one Redis round trip a poll, not one a node's batch
        await window.add(
            [
                batch
                for records in poll.values()
                for record in records
                if (batch := _sample_batch(record.value or b"")) is not None
            ]
        )

    stream = SideStream(consumer=consumer, cadence=CommitCadence(every_s=2.0), poll_timeout_ms=200)
    await stream.run(stop, handle)


def _sample_batch(value: bytes) -> WireBatch | None:
    """A sample batch (None for a rollup); the models judge what the plain read leaves to them."""
    batch = decode_sample_batch(value, checks=WINDOW_CHECKS, keep_texts=False)
    if batch is not None:
        return batch
    try:
        return decode_sample_batch_models(value)
    except EventDecodeError:
        log.warning("undecodable sample batch skipped")
        return None
