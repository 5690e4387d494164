"""The agent process: publish discovery, then every tick a SampleBatchV1 per node, faults and reports.

Delivery: the agent has no Postgres, so there is no outbox. It publishes straight to the broker with
acks=all and waits for every tick's sends. At-least-once still holds because nothing the agent says is
a one-off: discovery is re-sent at every start, samples are re-read every second (a lost tick is
replaced by the next), faults carry deterministic ids, and workload reports are re-derived on restart
by replaying the scheduler topic, or the checkpoint of it (consumers apply them idempotently per
placement). A checkpoint is written only after a tick's sends are acknowledged (adapters/agent/intake.py).

The broker may be away: at start the agent waits for it, and when it goes while running a tick fails and
the next one tries again (its samples are dropped, being about then; its reports and faults are kept and
sent again, the same bytes, so a repeat is dropped by event id). Every few seconds, and after an outage, it
checks which broker it talks to: on one that lost its log (restarted empty) it recreates the topics, reads
the scheduler topic again from its beginning (the relays publish again what the broker lost) and announces
its nodes again. Each outage is logged once when it starts and once when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from libs.common.bus.generations import generations_of, stack_topics
from libs.common.bus.incarnation import BROKER_ERRORS, Outage, look_at
from libs.common.bus.kafka import ensure_topics, wait_for_broker
from libs.common.events import Envelope, Event, encode, envelop, topic_of
from libs.common.events import topics as t
from libs.common.events.agent import HostActionRequestedV1, WorkloadProfileSetV1
from libs.common.events.sample_wire import SampleEncoder
from libs.common.stopping import sleep_or_stop
from services.telemetry.adapters.agent.intake import Command, Intake, IntakeSettings
from services.telemetry.adapters.agent.publisher import Publisher as KafkaPublisher
from services.telemetry.adapters.sim import FaultKind, UnknownGpu
from services.telemetry.domain.metrics import GpuLost
from services.telemetry.domain.xid import XidCounter
from services.telemetry.service.agent.devices import HostDevices
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.ports import Publisher
from services.telemetry.service.agent.prompt import PromptRunner, prompt_loop
from services.telemetry.service.agent.reports import (
    Allocation,
    encoded_samples,
    lost_fault,
    node_discovered,
    xid_fault,
)
from services.telemetry.service.agent.runner import AwaitsHistory
from services.telemetry.service.agent.setup import AgentSetup

__all__ = ["AgentSettings", "NodeAgent", "node_slices", "utc_now"]

log = logging.getLogger(__name__)
SOURCE = "/gpucloud/telemetry-agent"
PUBLISH_EVERY_NODES = 125  # node batches per producer hand-off within a tick (1,000 GPUs of 8)
#: Share of the sample interval over which a tick's node slices are spread. One agent per node (NVML)
#: is one slice; a simulated fleet in one process would otherwise read and send every node at the
#: tick, and each second's burst would queue behind itself in the producer, broker and aggregator.
SPREAD_SHARE = 0.8
#: How often the agent asks which broker it talks to (one metadata request; never per message).
BROKER_CHECK_EVERY_S = 10.0
#: At stop, how long the last round of shipping logs and outputs may take (what it leaves, the next start
#: ships: shipped.json says where it was).
SHIP_ON_STOP_S = 10.0


class AgentSettings(IntakeSettings, Protocol):
    """The settings the agent process reads (the service's settings have them)."""

    @property
    def kafka_partitions(self) -> int: ...
    @property
    def sample_interval_s(self) -> float: ...
    @property
    def kafka_generation_s(self) -> int: ...


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
        self,
        *,
        settings: AgentSettings,
        setup: AgentSetup,
        clock: Callable[[], datetime] = utc_now,
        publisher: Publisher | None = None,
    ) -> None:
        self._s = settings
        self._setup = setup
        self._clock = clock
        self._book = PlacementBook(runner=setup.runner, gpus=setup.gpus)
        self.devices = HostDevices(setup=setup, book=self._book, clock=clock, send=self._send)
        self.intake = Intake(
            settings=settings,
            book=self._book,
            gpus=setup.gpus,
            command=self._command,
            partitions=self.devices.partitions_changed,
        )
        self.intake.when_caught_up(self.devices.caught_up)  # device actions wait for the whole book
        self._xids = XidCounter()
        self._xid_totals: dict[str, int] = {}  # all codes together, per GPU: the sample's xid_count
        self._lost: set[str] = set()
        self._out: Publisher = publisher if publisher is not None else KafkaPublisher()
        self._encoder = SampleEncoder(source=SOURCE)
        self._unacked: list[tuple[str, bytes, bytes]] = []  # reports and faults queued since the last flush
        self._resend: list[tuple[str, bytes, bytes]] = []  # those a failed flush may have lost
        self._outage = Outage()
        self._cluster: str | None = None  # the broker whose log the intake reads
        self._samples = generations_of(settings, t.TELEMETRY_SAMPLES)
        self._samples_topic = ""  # the generation the last tick wrote, once created
        self._check_at = 0.0
        self._consumer: Any = None  # the intake's consumer, while running
        self.ticks = 0
        self.slow_ticks = 0
        self.failed_ticks = 0
        self.new_brokers = 0  # brokers found to have lost the log, and caught up with
        self._reporting = asyncio.Lock()  # a tick's reports or the quick poll's: one at a time (_report)
        self._shipping: asyncio.Task[None] | None = None  # a round of shipping logs and outputs

    @property
    def book(self) -> PlacementBook:
        """The placements this agent plays (to read: only the intake applies records to it)."""
        return self._book

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; a broker that is away at start is waited for."""
        consumer = await self._connect(stop)
        if consumer is None:
            return
        self._consumer = consumer
        try:
            if isinstance(runner := self._setup.runner, AwaitsHistory):
                self.intake.when_caught_up(runner.caught_up)  # its orphans are known only then
            await self.intake.catch_up(consumer)
            await self._announce()
            listener = asyncio.create_task(self.intake.listen(consumer, stop))
            quick = asyncio.create_task(self.quick_polls(stop))
            try:
                await self._ticks(stop)
            finally:
                for task in (listener, quick):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            # Only on a clean stop: after a failed send the book may be ahead of what was delivered.
            await self.intake.save(force=True)
        finally:
            self._consumer = None
            await self.devices.settled()
            await self._ship_last()
            if (mover := self._setup.mover) is not None:
                await mover.close()  # the next start takes up what is left (the run directories say it)
            await consumer.stop()
            await self._out.stop()
            for probe in self._setup.probes.values():
                await probe.close()

    async def _connect(self, stop: asyncio.Event) -> Any:
        """Wait for the broker, create the topics, start the producer and the intake's consumer; tried
        again until it works or `stop` is set (then None)."""
        s = self._s
        while not stop.is_set():
            consumer, opened = None, False
            try:
                await wait_for_broker(bootstrap=s.kafka_bootstrap_servers, timeout_s=5.0)
                await self._ensure_topics()
                self._out.open(bootstrap=s.kafka_bootstrap_servers, client_id="telemetry-agent")
                opened = True
                await self._out.start()
                consumer = self.intake.consumer()
                await consumer.start()
                self._cluster = (await look_at(bootstrap=s.kafka_bootstrap_servers)).cluster_id
            except BROKER_ERRORS as exc:
                self._cannot_reach(exc, doing="start")
                await self._close_quietly(consumer, publisher=opened)
                await sleep_or_stop(stop, 1.0)
                continue
            if (lasted := self._outage.ended()) is not None:
                log.warning(
                    "broker %s answers after %.1fs: the agent starts", s.kafka_bootstrap_servers, lasted
                )
            return consumer
        return None

    async def _close_quietly(self, consumer: Any, *, publisher: bool) -> None:
        """Stop what a failed start had started (the producer is opened afresh by the next try)."""
        if consumer is not None:
            with contextlib.suppress(*BROKER_ERRORS):
                await consumer.stop()
        if publisher:
            with contextlib.suppress(*BROKER_ERRORS):
                await self._out.stop()

    async def _ensure_topics(self) -> None:
        """Create the stack's topics that are missing, the samples' live generations among them."""
        s = self._s
        topics = stack_topics(s, time.time())
        await ensure_topics(bootstrap=s.kafka_bootstrap_servers, topics=topics, partitions=s.kafka_partitions)

    async def _samples_topic_now(self) -> str:
        """The samples' generation to write now, with the next, created first when it is new (telemetry's
        keeper creates each a generation ahead; the agent does not depend on it)."""
        now = self._clock().timestamp()  # the clock that stamps the samples
        if (topic := self._samples.topic_at(now)) != self._samples_topic:
            await self._out.create_topics(self._samples.live(now), partitions=self._s.kafka_partitions)
            self._samples_topic = topic
        return topic

    def _cannot_reach(self, exc: BaseException, *, doing: str) -> None:
        if self._outage.failed():
            log.warning(
                "the agent cannot %s: broker %s does not answer (%s: %s); samples are dropped and reports "
                "kept until it does, quietly",
                doing,
                self._s.kafka_bootstrap_servers,
                type(exc).__name__,
                exc,
            )

    async def _look_at_broker(self) -> None:
        """After an outage and every BROKER_CHECK_EVERY_S: on a broker that lost its log, catch up."""
        self._check_at = time.monotonic() + BROKER_CHECK_EVERY_S
        cluster = (await look_at(bootstrap=self._s.kafka_bootstrap_servers)).cluster_id
        if self._cluster is not None and cluster != self._cluster:
            await self._ensure_topics()
            if self._consumer is not None:
                await self._consumer.seek_to_beginning()
            self._announce_queued()
            self.new_brokers += 1
            log.warning(
                "broker %s lost its log (cluster %r, now %r): topics recreated, placements read again from "
                "the beginning, nodes announced again",
                self._s.kafka_bootstrap_servers,
                self._cluster,
                cluster,
            )
        self._cluster = cluster

    def _command(self, event: Command) -> None:
        fleet = self._setup.fleet
        if isinstance(event, WorkloadProfileSetV1):
            if self._setup.runner.set_profile(workload_id=event.workload_id, profile=event.profile):
                log.info("workload %s now plays profile %s", event.workload_id, event.profile)
            return
        if isinstance(event, HostActionRequestedV1):
            self.devices.requested(event)
            return
        if fleet is None:
            return
        with contextlib.suppress(UnknownGpu):  # another agent's GPU
            fleet.inject_fault(
                gpu_uuid=event.gpu_uuid,
                fault=FaultKind(event.fault),
                now=self._clock(),
                xid=event.xid,
                leak_pct_per_min=event.leak_pct_per_min,
                survives_reset=event.survives_reset,
            )
            log.info("injected %s (xid %s) on %s", event.fault, event.xid, event.gpu_uuid)

    async def _announce(self) -> None:
        self._announce_queued()
        try:
            await self._flush()
        except BROKER_ERRORS as exc:  # kept: the first tick that reaches the broker sends them
            self._cannot_reach(exc, doing="announce its nodes")

    async def _flush(self) -> None:
        """Wait for every send since the last flush; when one failed, they are all sent again next tick.
        What is queued while it waits is the next flush's (a tick's and the quick poll's may overlap)."""
        sent, self._unacked = self._unacked, []
        try:
            await self._out.flush()
        except BaseException:
            self._resend = [*self._resend, *sent]
            raise

    def _announce_queued(self) -> None:
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

    async def _ticks(self, stop: asyncio.Event) -> None:
        interval = self._s.sample_interval_s
        next_at = time.monotonic()
        while not stop.is_set():
            started = time.monotonic()
            if not await self._tick_or_wait(spread_s=interval * SPREAD_SHARE):
                await sleep_or_stop(stop, interval)
                next_at = time.monotonic()
                continue
            self.ticks += 1
            await self.intake.save()  # after the tick's sends are acknowledged
            next_at += interval
            if started + interval < time.monotonic():
                self.slow_ticks += 1
                log.warning("tick took %.2fs (interval %.2fs)", time.monotonic() - started, interval)
                next_at = time.monotonic()  # do not try to catch up: samples are about now
            await sleep_or_stop(stop, next_at - time.monotonic())

    async def _tick_or_wait(self, *, spread_s: float) -> bool:
        """One tick, and a look at the broker when due; False when the broker did not answer."""
        try:
            if self._outage.ongoing or time.monotonic() >= self._check_at:
                await self._look_at_broker()
            await self.tick(spread_s=spread_s)
        except BROKER_ERRORS as exc:
            self.failed_ticks += 1
            self._cannot_reach(exc, doing="publish")
            return False
        if (lasted := self._outage.ended()) is not None:
            log.warning(
                "the agent publishes again after %.1fs (%d tick(s) failed)", lasted, self.failed_ticks
            )
        return True

    async def tick(self, *, spread_s: float = 0.0) -> None:
        """Advance workloads, read every node once and publish what was seen.

        Reports and faults a failed flush may have lost are sent again first (the same messages); samples
        are not, being about then.

        The nodes are read and handed to the producer in slices of PUBLISH_EVERY_NODES, each batch
        stamped when its slice is read; with spread_s the slices start evenly over that many seconds
        instead of back to back (see node_slices).
        """
        started = time.monotonic()
        self._ship_soon()
        if (mover := self._setup.mover) is not None:
            await mover.step()  # migrations' checkpoints: their transfers run beside the ticks
        await self._report()
        self.devices.retry_layouts()  # layouts kept while their GPU was busy (its exits now told)
        allocations = self._book.allocations()
        topic = await self._samples_topic_now()
        hosts = list(self._setup.probes)
        for offset, part in node_slices(hosts, per_slice=PUBLISH_EVERY_NODES, spread_s=spread_s):
            delay = started + offset - time.monotonic()
            # Yield between slices even when behind: commands and acks are handled meanwhile.
            await asyncio.sleep(max(0.0, delay))
            await self._out.publish(topic, await self._read(part, allocations=allocations))
        await self._flush()

    async def _report(self, *, quick: bool = False) -> None:
        """Send what a failed flush may have lost and the runner's reports (of its quick poll, or of a
        whole poll), wait for the broker's acknowledgement, then let the runner forget them.

        One at a time (a tick's and the quick poll's): the runner's delivered() covers every poll before
        it, so no poll may come between another's sends and their acknowledgement.
        """
        async with self._reporting:
            resend, self._resend = self._resend, []
            for message in resend:
                self._queue(message)
            runner, now = self._setup.runner, self._clock()
            if quick and isinstance(runner, PromptRunner):
                reports = self._book.told(runner.poll_starts(now=now))
            else:
                reports = self._book.reports(now=now)
            if reports:
                self.intake.changed()
            for report in reports:
                self._send(report)
            await self._flush()
            runner.delivered()  # only now may a runner forget what its reports told

    async def quick_polls(self, stop: asyncio.Event) -> None:
        """Launches and starts told within milliseconds, between the ticks (service/agent/prompt.py)."""
        report = functools.partial(self._report, quick=True)
        await prompt_loop(runner=self._setup.runner, report=report, stop=stop, errors=BROKER_ERRORS)

    def _ship_soon(self) -> None:
        """Start a round of shipping logs and outputs off the host, unless one still runs: it goes on
        beside the ticks (an upload must not delay samples); an exit waits for it (ProcessRunner)."""
        shipper = self._setup.shipper
        if shipper is not None and (self._shipping is None or self._shipping.done()):
            self._shipping = asyncio.create_task(shipper.ship())

    async def _ship_last(self) -> None:
        """At stop: the round under way, then one more, within SHIP_ON_STOP_S."""
        shipper = self._setup.shipper
        if shipper is None:
            return
        try:
            async with asyncio.timeout(SHIP_ON_STOP_S):
                if self._shipping is not None:
                    await self._shipping
                await shipper.ship()
        except TimeoutError:
            log.warning(
                "the last shipping of logs and outputs took over %.0fs: left for the next start",
                SHIP_ON_STOP_S,
            )

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
        self._queue((self._s.topic(topic_of(payload)), envelope.subject.encode(), encode(envelope)))

    def _queue(self, message: tuple[str, bytes, bytes]) -> None:
        self._unacked.append(message)  # until a flush acknowledges it
        self._out.queue(message[0], key=message[1], value=message[2])
