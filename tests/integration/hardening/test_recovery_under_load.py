"""Issue 17, item 17: eight incidents at once; migrations that keep moving past the deadline are not
escalated, and no workload is asked to move twice.

The real recovery service on the real broker and Postgres, time-scaled: a 2 s deadline, 2 s of grace
after each migration step, a 30 s cap. The test plays inventory and the node agent; the migrations'
steps come half a second apart and take about 3.5 s in all, well past the deadline.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from aiokafka import AIOKafkaProducer
from fastapi import FastAPI

from libs.common.bus import create_producer
from libs.common.events import Envelope, Event, encode, envelop, topics
from libs.common.events.agent import MigrationStepV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.recovery import (
    DrainRequestedV1,
    IncidentClosedV1,
    IncidentOpenedV1,
    MigrationRequestedV1,
)
from libs.common.events.scheduler import AllocationItem, WorkloadPlacedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.recovery.app import create_app
from services.recovery.settings import RecoverySettings
from tests.integration.support import ADMIN_HEADERS, Isolation, TopicReader, eventually, running

Events = list[tuple[Envelope, Event]]
Phase = Literal["checkpoint", "transfer", "restore", "running"]
STEPS: list[tuple[Phase, int]] = [
    ("checkpoint", 15),
    ("transfer", 30),
    ("transfer", 45),
    ("transfer", 60),
    ("restore", 75),
    ("restore", 90),
    ("running", 100),
]
# Eight faulty GPUs: two on n0 sharing the 2-GPU workload "wide", one on each of n1..n6.
FAULTY = [("n0", "g0a"), ("n0", "g0b")] + [(f"n{i}", f"g{i}a") for i in range(1, 7)]
WORKLOADS = {"wide": ("n0", ("g0a", "g0b"))} | {f"w{i}": (f"n{i}", (f"g{i}a",)) for i in range(1, 7)}
STEP_S = 0.5  # between two migration steps: a quarter of the grace


def _of(events: Events, cls: type[Any]) -> list[Any]:
    return [p for _, p in events if isinstance(p, cls)]


async def _send(iso: Isolation, producer: AIOKafkaProducer, topic: str, *payloads: Event) -> None:
    for payload in payloads:
        envelope = envelop(payload, source="test")
        await producer.send_and_wait(
            f"{iso.topic_prefix}{topic}", value=encode(envelope), key=envelope.subject.encode()
        )


def _placed(workload: str, node: str, gpus: tuple[str, ...]) -> WorkloadPlacedV1:
    items = [AllocationItem(gpu_uuid=g, units=Decimal(8), model="H100") for g in gpus]
    return WorkloadPlacedV1(
        workload_id=workload, tenant_id="acme", placement_id=f"{workload}-p1", node=node,
        allocations=items, kind="job", priority=0.7,
    )  # fmt: skip


def _step(workload: str, phase: Phase, percent: int) -> MigrationStepV1:
    return MigrationStepV1(
        workload_id=workload, tenant_id="acme", placement_id=f"{workload}-p2", node="n7", phase=phase,
        percent=percent,
    )  # fmt: skip


def _app(iso: Isolation) -> FastAPI:
    settings = iso.settings(
        RecoverySettings,
        "recovery",
        settle_s=0.5,
        tick_s=0.2,
        deadline_s=2,
        progress_grace_s=2,
        deadline_cap_s=30,
        consume_samples=False,
    )
    return create_app(settings)


async def test_eight_incidents_whose_migrations_keep_moving_recover_and_move_each_workload_once(
    isolation: Isolation,
) -> None:
    app = _app(isolation)
    producer = create_producer(bootstrap=isolation.infra.kafka, client_id="test-load")
    await producer.start()
    reader = TopicReader(bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.RECOVERY)
    try:
        async with running(app) as client, reader as r:

            async def send(topic: str, *payloads: Event) -> None:
                await _send(isolation, producer, topic, *payloads)

            await send(topics.SCHEDULER, *[_placed(w, n, g) for w, (n, g) in WORKLOADS.items()])

            async def placed() -> bool:
                count = await app.state.runtime.pool.fetchval("SELECT count(*) FROM placements")
                return int(count) == len(WORKLOADS)

            await eventually(placed, timeout=30, what="the placements recorded")
            now = datetime.now(UTC)
            await send(
                topics.TELEMETRY_FAULTS,
                *[
                    FaultSignaledV1(fault_id=f"f-{g}", kind="xid", xid=48, gpu_uuid=g, node=n, at=now)
                    for n, g in FAULTY
                ],
            )
            await r.wait_for(lambda evs: len(_of(evs, DrainRequestedV1)) == 8, timeout=30, what="8 drains")
            await send(
                topics.INVENTORY,
                *[
                    GpuHealthChangedV1(gpu_uuid=g, node=n, previous="healthy", health="draining", reason="t")
                    for n, g in FAULTY
                ],
            )
            await r.wait_for(
                lambda evs: {m.workload_id for m in _of(evs, MigrationRequestedV1)} == set(WORKLOADS),
                timeout=30,
                what="every workload asked to move",
            )
            for phase, percent in STEPS:  # about 3.5 s of progress, past the 2 s deadline
                await asyncio.sleep(STEP_S)
                await send(topics.NODE_AGENT, *[_step(w, phase, percent) for w in WORKLOADS])

            events = await r.wait_for(
                lambda evs: len(_of(evs, IncidentClosedV1)) == 8, timeout=30, what="8 incidents closed"
            )
            assert len(_of(events, IncidentOpenedV1)) == 8
            outcomes = Counter(c.outcome for c in _of(events, IncidentClosedV1))
            assert outcomes == Counter({"recovered": 8}), [c.reason for c in _of(events, IncidentClosedV1)]
            # The 2-GPU workload is held by two incidents: it is asked to move once, not once by each.
            asked = Counter(m.workload_id for m in _of(events, MigrationRequestedV1))
            assert asked == Counter(dict.fromkeys(WORKLOADS, 1))
            listed = (await client.get("/v1/incidents", headers=ADMIN_HEADERS)).json()
            assert {i["state"] for i in listed} == {"resolved"}
            moved = [i["progress_percent"] for i in listed if i["progress_percent"] is not None]
            assert moved == [100] * 7  # the second incident on n0 had nothing of its own to move
    finally:
        await producer.stop()
