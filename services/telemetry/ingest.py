"""The high-throughput sample path: telemetry.samples -> Redis (+ rollup windows, fault detection).

Not the per-event inbox runner: a sample write is an idempotent overwrite (latest value per GPU), so
a redelivered batch changes nothing that matters and needs no inbox row. Each poll becomes one Redis
pipeline; the faults it reveals go through the outbox in one transaction; offsets are committed only
after both. A crash before the commit replays the poll, which rewrites the same values.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import ConsumerRecord, TopicPartition

from libs.common.bus.kafka import create_consumer
from libs.common.events import EventDecodeError, topics
from libs.common.events.telemetry import FaultSignaledV1
from libs.common.runtime import BackgroundTask, ServiceRuntime
from services.telemetry.observability import (
    FAULTS_DETECTED,
    INGEST_BATCH_SECONDS,
    SAMPLE_TO_REDIS_SECONDS,
    SAMPLES_INGESTED,
)
from services.telemetry.state import TelemetryState
from services.telemetry.wire import WireBatch, decode_sample_batch

__all__ = ["ingest_loop", "ingest_records"]

log = logging.getLogger(__name__)
Records = Mapping[TopicPartition, Sequence[ConsumerRecord[bytes, bytes]]]


def ingest_loop(state: TelemetryState) -> BackgroundTask:
    """The background task consuming telemetry.samples for this aggregator."""

    async def loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        s = runtime.settings
        consumer = create_consumer(
            bootstrap=s.kafka_bootstrap_servers,
            group_id=s.group_id("samples"),
            topics=[s.topic(topics.TELEMETRY_SAMPLES)],
            client_id="telemetry.samples",
        )
        await consumer.start()
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=200, max_records=2000)
                if batches:
                    await ingest_records(runtime=runtime, state=state, batches=batches)
                    await consumer.commit({tp: recs[-1].offset + 1 for tp, recs in batches.items()})
        finally:
            await consumer.stop()

    return loop


async def ingest_records(*, runtime: ServiceRuntime, state: TelemetryState, batches: Records) -> None:
    """Apply one poll: one Redis pipeline, rollup windows, and detected faults via the outbox."""
    started = time.perf_counter()
    live = state.live(runtime)
    pipe = runtime.redis.pipeline(transaction=False)
    sampled_at: list[float] = []
    faults: list[FaultSignaledV1] = []
    for records in batches.values():
        for record in records:
            batch = _decode(record.value)
            if batch is None:
                continue
            at = batch.at.timestamp()
            entries, recent = _entries(state, node=batch.node, at=batch.at.isoformat(), samples=batch.samples)
            live.write_batch(pipe, node=batch.node, entries=entries, recent=recent)
            for sample in batch.samples:
                state.rollups.add(node=batch.node, at=at, sample=sample)
                faults.extend(state.detector.observe(node=batch.node, at=batch.at, sample=sample))
            sampled_at.append(at)
            SAMPLES_INGESTED.inc(len(batch.samples))
    if sampled_at:
        await pipe.execute()
    done = time.time()
    for at in sampled_at:
        SAMPLE_TO_REDIS_SECONDS.observe(max(0.0, done - at))
    if faults:
        await _signal(runtime, faults)
    INGEST_BATCH_SECONDS.observe(time.perf_counter() - started)


def _decode(raw: bytes | None) -> WireBatch | None:
    """A sample batch, or None: node rollups share the topic, and unreadable batches are skipped."""
    try:
        return decode_sample_batch(raw or b"")
    except EventDecodeError as exc:
        # A batch that cannot be read is only a lost second of one node: keep the stream moving.
        log.warning("skipping undecodable sample batch: %s", exc)
        return None


def _entries(
    state: TelemetryState, *, node: str, at: str, samples: list[dict[str, Any]]
) -> tuple[dict[str, bytes], list[str]]:
    """JSON per GPU, labelled with the scheduler's allocation (the agent's labels are a fallback)."""
    entries: dict[str, bytes] = {}
    recent: list[str] = []
    for sample in samples:
        gpu = sample["gpu"]
        workload, tenant = state.view.labels(sample.get("parent_gpu") or gpu)
        if workload is not None:
            sample["workload_id"], sample["tenant_id"] = workload, tenant
        sample["node"], sample["at"] = node, at
        entries[gpu] = json.dumps({k: v for k, v in sample.items() if v is not None}).encode()
        if sample.get("workload_id") and not sample.get("parent_gpu"):
            recent.append(gpu)
    return entries, recent


async def _signal(runtime: ServiceRuntime, faults: list[FaultSignaledV1]) -> None:
    async with runtime.uow() as uow:
        for fault in faults:
            await uow.emit(fault)
            FAULTS_DETECTED.labels(fault.kind).inc()
        await uow.commit()
