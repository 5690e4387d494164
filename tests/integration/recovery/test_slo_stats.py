"""/v1/stats/slo from real incidents: detection to the host running the workload again, per fault class."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from libs.common.events import Event, envelop, topics
from libs.common.events.agent import MigrationStepV1
from libs.common.events.inventory import GpuHealthChangedV1
from libs.common.events.recovery import MigrationRequestedV1
from libs.common.events.scheduler import AllocationItem, WorkloadPlacedV1
from libs.common.events.telemetry import FaultSignaledV1
from services.recovery.app import create_app
from services.recovery.settings import RecoverySettings
from tests.integration.bus_fixtures import publish
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    TopicReader,
    eventually,
    key_works,
    provision_tenant,
    running,
)


def _placed(workload: str, tenant: str, *, gpu: str, node: str, placement: str) -> WorkloadPlacedV1:
    item = AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="A100-80GB")
    return WorkloadPlacedV1(
        workload_id=workload, tenant_id=tenant, placement_id=placement, node=node,
        allocations=[item], kind="job", priority=0.5,
    )  # fmt: skip


def _fault(fault_id: str, *, xid: int, gpu: str, node: str) -> FaultSignaledV1:
    at = datetime.now(UTC) - timedelta(seconds=1)
    return FaultSignaledV1(fault_id=fault_id, kind="xid", xid=xid, gpu_uuid=gpu, node=node, at=at)


async def _send(iso: Isolation, topic: str, *payloads: Event) -> None:
    await publish(iso, [envelop(p, source="test") for p in payloads], topic=topic)


def _of(events: list[Any], cls: type[Any]) -> list[Any]:
    return [p for _, p in events if isinstance(p, cls)]


async def test_slo_stats_measure_detection_to_the_hosts_running_step_per_fault_class_for_a_tenant(
    isolation: Isolation,
) -> None:
    settings = isolation.settings(
        RecoverySettings, "recovery", settle_s=0.2, tick_s=0.2, consume_samples=False
    )
    app = create_app(settings)
    reader = TopicReader(bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.RECOVERY)
    async with running(app) as client, reader as r:
        key = await provision_tenant(isolation, "acme")
        await _send(
            isolation,
            topics.SCHEDULER,
            _placed("w1", "acme", gpu="g1", node="n1", placement="p1"),
            _placed("w2", "acme", gpu="g5", node="n3", placement="p5"),
        )

        async def placed() -> bool:
            return int(await app.state.runtime.pool.fetchval("SELECT count(*) FROM placements")) >= 2

        await eventually(placed, timeout=30, what="placements recorded")
        # A double-bit ECC error under w1; the same on an idle GPU; an unknown XID under w2 (escalated).
        await _send(
            isolation,
            topics.TELEMETRY_FAULTS,
            _fault("f1", xid=48, gpu="g1", node="n1"),
            _fault("f2", xid=48, gpu="g9", node="n4"),
            _fault("f3", xid=999, gpu="g5", node="n3"),
        )
        await _send(
            isolation,
            topics.INVENTORY,
            GpuHealthChangedV1(gpu_uuid="g1", node="n1", previous="healthy", health="draining", reason="x"),
        )
        events = await r.wait_for(lambda evs: bool(_of(evs, MigrationRequestedV1)), timeout=30, what="move")
        move = _of(events, MigrationRequestedV1)[0]
        incident = (await client.get(f"/v1/incidents/{move.incident_id}", headers=ADMIN_HEADERS)).json()
        detected_at = datetime.fromisoformat(incident["detected_at"])
        # The host ran w1 on its new GPU halfway between detection and now; its report reaches recovery later.
        ran_at = detected_at + (datetime.now(UTC) - detected_at) / 2
        took_s = (ran_at - detected_at).total_seconds()
        step = MigrationStepV1(
            workload_id="w1", tenant_id="acme", placement_id="p2", node="n2",
            phase="running", percent=100, at=ran_at,
        )  # fmt: skip
        await _send(isolation, topics.NODE_AGENT, step)

        async def recovered() -> dict[str, Any] | None:
            got = await client.get(f"/v1/incidents/{move.incident_id}", headers=ADMIN_HEADERS)
            body: dict[str, Any] = got.json()
            return body if body["recovered_at"] is not None else None

        detail = await eventually(recovered, timeout=30, what="w1 recovered")
        assert datetime.fromisoformat(detail["recovered_at"]) == ran_at

        slo = (await client.get("/v1/stats/slo?period=1h", headers=ADMIN_HEADERS)).json()
        dbe, unknown = slo["by_fault_type"]["xid_48"], slo["by_fault_type"]["xid_unknown"]
        # The idle GPU's incident is counted, not measured: it had nothing to recover.
        assert (dbe["incidents"], dbe["measured"], dbe["recovered"]) == (2, 1, 1)
        assert dbe["recover_p50_s"] == dbe["recover_p99_s"] == pytest.approx(took_s, abs=1e-6)
        assert (dbe["share_within_1m"], dbe["share_within_3m"]) == (1.0, 1.0)
        # Escalated at once, w2 never ran again; under a minute old, it is not judged a miss yet.
        assert (unknown["measured"], unknown["recovered"], unknown["share_within_1m"]) == (1, 0, None)
        assert (slo["overall"]["incidents"], slo["overall"]["measured"]) == (3, 2)

        await eventually(lambda: key_works(client, key, "/v1/stats/slo"), timeout=30, what="tenant key")
        mine = (await client.get("/v1/stats/slo?period=1h", headers={"X-API-Key": key})).json()
        assert sorted(mine["by_fault_type"]) == ["xid_48", "xid_unknown"]
        assert mine["overall"]["incidents"] == 2  # the idle GPU's incident affects no tenant of acme's
        only = (await client.get("/v1/stats/slo?fault_type=xid_48", headers=ADMIN_HEADERS)).json()
        assert list(only["by_fault_type"]) == ["xid_48"]
