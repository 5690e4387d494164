"""A workload the host moved onto a GPU out of service is moved off it (real broker, Postgres, Redis)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypedDict

import pytest

from libs.common.events import Envelope, Event, envelop, topics
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.recovery import DrainRequestedV1, IncidentClosedV1, MigrationRequestedV1
from libs.common.events.scheduler import AllocationItem, WorkloadPlacedV1, WorkloadReallocatedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.recovery.app import create_app
from services.recovery.settings import RecoverySettings
from tests.integration.bus_fixtures import publish
from tests.integration.support import Isolation, TopicReader, eventually, running

pytestmark = pytest.mark.integration

Events = list[tuple[Envelope, Event]]


class _Ids(TypedDict):
    workload_id: str
    tenant_id: str
    placement_id: str
    node: str


IDS: _Ids = {"workload_id": "w1", "tenant_id": "acme", "placement_id": "p1", "node": "n1"}


def _item(gpu: str) -> AllocationItem:
    return AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="A100-80GB")


def _of(events: Events, cls: type[Any]) -> list[Any]:
    return [p for _, p in events if isinstance(p, cls)]


async def _send(iso: Isolation, topic: str, *payloads: Event) -> None:
    await publish(iso, [envelop(p, source="test") for p in payloads], topic=topic)


async def test_a_workload_reallocated_onto_a_failed_gpu_is_moved_off_it(isolation: Isolation) -> None:
    settings = isolation.settings(
        RecoverySettings, "recovery", settle_s=0.5, tick_s=0.2, consume_samples=False
    )
    app = create_app(settings)
    reader = TopicReader(bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.RECOVERY)
    async with running(app), reader as r:
        ecc = FaultSignaledV1(fault_id="f1", kind="ecc", gpu_uuid="g1", node="n1", at=datetime.now(UTC))
        await _send(isolation, topics.TELEMETRY_FAULTS, ecc)
        events = await r.wait_for(lambda evs: bool(_of(evs, DrainRequestedV1)), timeout=30, what="drain")
        drain = _of(events, DrainRequestedV1)[0]
        failed = GpuHealthChangedV1(
            gpu_uuid="g1", node="n1", previous="healthy", health="failed", reason="ecc"
        )
        await _send(isolation, topics.INVENTORY, failed)
        await r.wait_for(lambda evs: bool(_of(evs, IncidentClosedV1)), timeout=30, what="closed")

        placed = WorkloadPlacedV1(**IDS, allocations=[_item("g2")], kind="job", priority=0.7)
        moved = WorkloadReallocatedV1(**IDS, allocations=[_item("g1")], previous=[_item("g2")])
        await _send(isolation, topics.SCHEDULER, placed, moved)
        events = await r.wait_for(lambda evs: bool(_of(evs, MigrationRequestedV1)), timeout=30, what="move")

        move = _of(events, MigrationRequestedV1)[0]
        assert (move.workload_id, move.away_from_gpu, move.incident_id) == ("w1", "g1", drain.incident_id)

        async def on_g1() -> bool:
            gpus = await app.state.runtime.pool.fetchval(
                "SELECT gpus FROM placements WHERE workload_id = 'w1'"
            )
            return list(gpus or []) == ["g1"]

        await eventually(on_g1, timeout=10, what="the placement map on g1")
