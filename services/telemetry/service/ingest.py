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
from typing import Any, Protocol

from libs.common.bus.side_stream import CommitCadence, Poll, SideStream, side_stream_consumer
from libs.common.events import EventDecodeError, topics
from libs.common.events.sample_wire import WireBatch, decode_sample_batch
from libs.common.events.telemetry import FaultSignaledV1
from libs.common.runtime import BackgroundTask, ServiceRuntime
from services.telemetry.service.observability import (
    FAULTS_DETECTED,
    INGEST_BATCH_SECONDS,
    SAMPLE_STAGE_SECONDS,
    SAMPLE_TO_REDIS_SECONDS,
    SAMPLES_INGESTED,
)
from services.telemetry.service.state import TelemetryState

__all__ = ["SampleRecord", "ingest_loop", "ingest_records"]

log = logging.getLogger(__name__)
_dumps = json.JSONEncoder(separators=(",", ":")).encode
POLL_RECORDS = 500  # node batches per poll: a sample waits for its whole poll to reach Redis


class SampleRecord(Protocol):
    """What ingest reads of a consumed record (aiokafka's ConsumerRecord has it)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def value(self) -> bytes | None: ...


#: One poll: records per topic partition (the consumer's own key type).
Records = Mapping[Any, Sequence[SampleRecord]]


def ingest_loop(state: TelemetryState) -> BackgroundTask:
    """The background task consuming telemetry.samples for this aggregator."""

    async def loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        consumer = side_stream_consumer(
            runtime.settings, name="samples", topic=topics.TELEMETRY_SAMPLES, client_id="telemetry.samples"
        )

        async def handle(poll: Poll) -> None:
            if poll:
                await ingest_records(runtime=runtime, state=state, batches=poll)

        # Committed after every poll: the poll's Redis pipeline and faults are written by then.
        stream = SideStream(
            consumer=consumer, cadence=CommitCadence(), poll_timeout_ms=200, max_records=POLL_RECORDS
        )
        await stream.run(stop, handle)

    return loop


async def ingest_records(*, runtime: ServiceRuntime, state: TelemetryState, batches: Records) -> None:
    """Apply one poll: one Redis pipeline, rollup windows, and detected faults via the outbox."""
    started, polled = time.perf_counter(), time.time()
    entries: dict[str, bytes] = {}  # gpu -> latest JSON; a later batch of the poll overwrites an earlier
    members: dict[str, list[str]] = {}
    recent: list[tuple[str, bytes]] = []
    sampled_at: list[tuple[float, float | None]] = []  # (sampling instant, record create time)
    faults: list[FaultSignaledV1] = []
    observe, samples_seen = state.detector.observe, 0
    for records in batches.values():
        for record in records:
            batch = _decode(record.value)
            if batch is None:
                continue
            node, when, samples = batch.node, batch.at, batch.samples
            at = when.timestamp()
            members[node] = _entries(
                state, node=node, at=when.isoformat(), batch=batch, into=entries, recent=recent
            )
            state.rollups.add_batch(node=node, at=at, samples=samples)
            for sample in samples:
                if found := observe(node=node, at=when, sample=sample):
                    faults.extend(found)
            sampled_at.append((at, _created(record)))
            samples_seen += len(samples)
    if sampled_at:
        pipe = runtime.redis.pipeline(transaction=False)
        state.live(runtime).write_poll(pipe, entries=entries, members=members, recent=recent)
        await pipe.execute()
        SAMPLES_INGESTED.inc(samples_seen)
    _observe_latency(sampled_at, polled=polled, done=time.time())
    if faults:
        await _signal(runtime, faults)
    INGEST_BATCH_SECONDS.observe(time.perf_counter() - started)


def _created(record: SampleRecord) -> float | None:
    """The record's create time (epoch s) when the producer set it: when the agent batched it."""
    return record.timestamp / 1000.0 if record.timestamp_type == 0 and record.timestamp > 0 else None


def _observe_latency(sampled_at: list[tuple[float, float | None]], *, polled: float, done: float) -> None:
    """Sampling instant to Redis per node batch, and the same split by stage (see observability)."""
    total, stage = SAMPLE_TO_REDIS_SECONDS.observe, SAMPLE_STAGE_SECONDS.labels
    agent, transit, aggregator = (stage(s).observe for s in ("agent", "transit", "aggregator"))
    for at, created in sampled_at:
        total(max(0.0, done - at))
        aggregator(max(0.0, done - polled))
        if created is not None:
            agent(max(0.0, created - at))
            transit(max(0.0, polled - created))


def _decode(raw: bytes | None) -> WireBatch | None:
    """A sample batch, or None: node rollups share the topic, and unreadable batches are skipped."""
    try:
        return decode_sample_batch(raw or b"")
    except EventDecodeError as exc:
        # A batch that cannot be read is only a lost second of one node: keep the stream moving.
        log.warning("skipping undecodable sample batch: %s", exc)
        return None


def _entries(
    state: TelemetryState,
    *,
    node: str,
    at: str,
    batch: WireBatch,
    into: dict[str, bytes],
    recent: list[tuple[str, bytes]],
) -> list[str]:
    """JSON per GPU into `into`, labelled with the scheduler's allocation (the agent's labels are a
    fallback); allocated GPUs' samples also go to `recent`. Returns the batch's GPUs.

    Where the batch kept each sample's text, the stored JSON is that text with the labels, node and
    time appended (what re-encoding the updated dict writes, without the encoding); a sample whose
    labels disagree with the allocation, or with nulls to leave out, is re-encoded.
    """
    allocated = state.view.by_gpu  # AllocationView.labels, without a call per sample
    texts = batch.texts
    tail = f',"node":{_dumps(node)},"at":"{at}"}}'
    gpus: list[str] = []
    for n, sample in enumerate(batch.samples):
        gpu = sample["gpu"]
        get = sample.get
        parent = get("parent_gpu")
        row = allocated.get(parent or gpu) if allocated else None
        workload, tenant = (row.workload_id, row.tenant_id) if row is not None else (None, None)
        value: bytes | None = None
        if texts is not None and "node" not in sample and "at" not in sample and None not in sample.values():
            if workload is None or (get("workload_id") == workload and get("tenant_id") == tenant):
                value = (texts[n][:-1] + tail).encode()
            elif "workload_id" not in sample and "tenant_id" not in sample:
                added = f',"workload_id":{_dumps(workload)},"tenant_id":{_dumps(tenant)}'
                value = (texts[n][:-1] + added + tail).encode()
        if workload is not None:
            sample["workload_id"], sample["tenant_id"] = workload, tenant
        if value is None:
            sample["node"], sample["at"] = node, at
            if None in sample.values():
                value = _dumps({k: v for k, v in sample.items() if v is not None}).encode()
            else:
                value = _dumps(sample).encode()
        into[gpu] = value
        gpus.append(gpu)
        if not parent and get("workload_id"):
            recent.append((gpu, value))
    return gpus


async def _signal(runtime: ServiceRuntime, faults: list[FaultSignaledV1]) -> None:
    async with runtime.uow() as uow:
        for fault in faults:
            await uow.emit(fault)
            FAULTS_DETECTED.labels(fault.kind).inc()
        await uow.commit()
