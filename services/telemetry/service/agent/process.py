"""The agent process: publish discovery, then every tick a SampleBatchV1 per node, faults and reports.

Delivery: the agent has no Postgres, so there is no outbox. It publishes straight to the broker with
acks=all and waits for every tick's sends. At-least-once still holds because nothing the agent says is
a one-off: discovery is re-sent at every start, samples are re-read every second (a lost tick is
replaced by the next), faults carry deterministic ids, and workload reports are re-derived on restart
by replaying the scheduler topic, or the checkpoint of it (consumers apply them idempotently per
placement). A checkpoint is written only after a tick's sends are acknowledged (adapters/agent/intake.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from libs.common.bus.kafka import all_physical_topics, ensure_topics, wait_for_broker
from libs.common.events import Envelope, Event, encode, envelop, topic_of
from libs.common.events import topics as t
from libs.common.events.agent import WorkloadProfileSetV1
from libs.common.events.sample_wire import SampleEncoder
from libs.common.stopping import sleep_or_stop
from services.telemetry.adapters.agent.gzip_level import use_gzip_level
from services.telemetry.adapters.agent.intake import Command, Intake, IntakeSettings
from services.telemetry.adapters.agent.publisher import Publisher
from services.telemetry.adapters.sim import FaultKind, UnknownGpu
from services.telemetry.domain.metrics import GpuLost
from services.telemetry.domain.xid import XidCounter
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.reports import (
    Allocation,
    encoded_samples,
    lost_fault,
    node_discovered,
    xid_fault,
)
from services.telemetry.service.agent.setup import AgentSetup

__all__ = ["AgentSettings", "NodeAgent", "node_slices", "utc_now"]

log = logging.getLogger(__name__)
SOURCE = "/gpucloud/telemetry-agent"
PUBLISH_EVERY_NODES = 125  # node batches per producer hand-off within a tick (1,000 GPUs of 8)
#: Share of the sample interval over which a tick's node slices are spread. One agent per node (NVML)
#: is one slice; a simulated fleet in one process would otherwise read and send every node at the
#: tick, and each second's burst would queue behind itself in the producer, broker and aggregator.
SPREAD_SHARE = 0.8


class AgentSettings(IntakeSettings, Protocol):
    """The settings the agent process reads (the service's settings have them)."""

    @property
    def kafka_partitions(self) -> int: ...
    @property
    def sample_interval_s(self) -> float: ...


def node_slices(hosts: Sequence[str], *, per_slice: int, spread_s: float) -> list[tuple[float, list[str]]]:
    """The hosts in fleet order, cut into slices of per_slice, each with its start offset in seconds:
    evenly spaced over [0, spread_s) (all 0 when spread_s is 0). Every host is in exactly one slice."""
    parts = [list(hosts[i : i + per_slice]) for i in range(0, len(hosts), per_slice)]
    return [(n * spread_s / len(parts), part) for n, part in enumerate(parts)]


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


class NodeAgent:
    """One agent process over one or many nodes."""

    def __init__(
        self, *, settings: AgentSettings, setup: AgentSetup, clock: Callable[[], datetime] = utc_now
    ) -> None:
        self._s = settings
        self._setup = setup
        self._clock = clock
        self._book = PlacementBook(runner=setup.runner, gpus=setup.gpus)
        self.intake = Intake(settings=settings, book=self._book, gpus=setup.gpus, command=self._command)
        self._xids = XidCounter()
        self._xid_totals: dict[str, int] = {}  # all codes together, per GPU: the sample's xid_count
        self._lost: set[str] = set()
        self._out = Publisher()
        self._encoder = SampleEncoder(source=SOURCE)
        self.ticks = 0
        self.slow_ticks = 0

    @property
    def book(self) -> PlacementBook:
        """The placements this agent plays (to read: only the intake applies records to it)."""
        return self._book

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set."""
        s = self._s
        await wait_for_broker(bootstrap=s.kafka_bootstrap_servers)
        await ensure_topics(
            bootstrap=s.kafka_bootstrap_servers,
            topics=all_physical_topics(s.kafka_topic_prefix),
            partitions=s.kafka_partitions,
        )
        use_gzip_level()  # aiokafka's fixed level 9 was the agent's top cost (adapters/agent/gzip_level.py)
        self._out.open(bootstrap=s.kafka_bootstrap_servers, client_id="telemetry-agent")
        consumer = self.intake.consumer()
        await self._out.start()
        await consumer.start()
        try:
            await self.intake.catch_up(consumer)
            await self._announce()
            listener = asyncio.create_task(self.intake.listen(consumer, stop))
            try:
                await self._ticks(stop)
            finally:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener
            # Only on a clean stop: after a failed send the book may be ahead of what was delivered.
            await self.intake.save(force=True)
        finally:
            await consumer.stop()
            await self._out.stop()
            for probe in self._setup.probes.values():
                await probe.close()

    def _command(self, event: Command) -> None:
        fleet = self._setup.fleet
        if isinstance(event, WorkloadProfileSetV1):
            if self._setup.runner.set_profile(workload_id=event.workload_id, profile=event.profile):
                log.info("workload %s now plays profile %s", event.workload_id, event.profile)
            return
        if fleet is None:
            return
        with contextlib.suppress(UnknownGpu):  # another agent's GPU
            fleet.inject_fault(
                gpu_uuid=event.gpu_uuid, fault=FaultKind(event.fault), now=self._clock(), xid=event.xid
            )
            log.info("injected %s (xid %s) on %s", event.fault, event.xid, event.gpu_uuid)

    async def _announce(self) -> None:
        for host, discovery in self._setup.discoveries.items():
            self._send(
                node_discovered(
                    discovery=discovery,
                    labels=self._setup.labels.get(host, {}),
                    models=self._setup.models,
                    mig=self._setup.mig,
                    source=self._setup.source,
                )
            )
        await self._out.flush()

    async def _ticks(self, stop: asyncio.Event) -> None:
        interval = self._s.sample_interval_s
        next_at = time.monotonic()
        while not stop.is_set():
            started = time.monotonic()
            await self.tick(spread_s=interval * SPREAD_SHARE)
            self.ticks += 1
            await self.intake.save()  # after the tick's sends are acknowledged
            next_at += interval
            if started + interval < time.monotonic():
                self.slow_ticks += 1
                log.warning("tick took %.2fs (interval %.2fs)", time.monotonic() - started, interval)
                next_at = time.monotonic()  # do not try to catch up: samples are about now
            await sleep_or_stop(stop, next_at - time.monotonic())

    async def tick(self, *, spread_s: float = 0.0) -> None:
        """Advance workloads, read every node once and publish what was seen.

        The nodes are read and handed to the producer in slices of PUBLISH_EVERY_NODES, each batch
        stamped when its slice is read; with spread_s the slices start evenly over that many seconds
        instead of back to back (see node_slices).
        """
        started = time.monotonic()
        reports = self._book.reports(now=self._clock())
        if reports:
            self.intake.changed()
        for report in reports:
            self._send(report)
        allocations = self._book.allocations()
        topic = self._s.topic(t.TELEMETRY_SAMPLES)
        hosts = list(self._setup.probes)
        for offset, part in node_slices(hosts, per_slice=PUBLISH_EVERY_NODES, spread_s=spread_s):
            delay = started + offset - time.monotonic()
            # Yield between slices even when behind: commands and acks are handled meanwhile.
            await asyncio.sleep(max(0.0, delay))
            await self._out.publish(topic, await self._read(part, allocations=allocations))
        await self._out.flush()

    async def _read(
        self, hosts: list[str], *, allocations: dict[str, Allocation]
    ) -> list[tuple[bytes, bytes]]:
        """One (key, SampleBatchV1) per node, all stamped now; XIDs and lost GPUs are sent as faults."""
        stamp = self._clock().isoformat()
        batches: list[tuple[bytes, bytes]] = []
        for host in hosts:
            probe = self._setup.probes[host]
            # A probe that offers sample_values (the simulator) skips building a model per GPU.
            fast = getattr(probe, "sample_values", None)
            readings: list[Any] = await (fast() if fast is not None else probe.sample())
            xids = await probe.poll_xids()
            if xids:
                self._xids.record(xids)
                for event in xids:
                    total = self._xid_totals.get(event.gpu_uuid, 0) + 1
                    self._xid_totals[event.gpu_uuid] = total
                    self._send(xid_fault(event, total=total))
            self._track_loss(readings)
            samples = encoded_samples(
                encoder=self._encoder,
                readings=readings,
                models=self._setup.models,
                allocations=allocations,
                xid_totals=self._xid_totals,
                xid_codes=self._xids.by_gpu,
            )
            batches.append((host.encode(), self._encoder.batch(node=host, stamp=stamp, samples=samples)))
        return batches

    def _track_loss(self, readings: list[Any]) -> None:
        for reading in readings:
            if isinstance(reading, GpuLost):
                if reading.gpu_uuid not in self._lost:
                    self._lost.add(reading.gpu_uuid)
                    self._send(lost_fault(reading))
            elif self._lost:
                self._lost.discard(reading[0] if isinstance(reading, tuple) else reading.gpu_uuid)

    def _send(self, payload: Event) -> None:
        envelope: Envelope = envelop(payload, source=SOURCE)
        self._out.queue(
            self._s.topic(topic_of(payload)), key=envelope.subject.encode(), value=encode(envelope)
        )
