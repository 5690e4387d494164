"""The recovery service through the real broker, Postgres and Redis; the test plays the other services."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from fastapi import FastAPI

from libs.common.events import Envelope, Event, envelop, topics
from libs.common.events.agent import MigrationStepV1
from libs.common.events.inventory import GpuHealth, GpuHealthChangedV1
from libs.common.events.recovery import (
    DrainRequestedV1,
    IncidentClosedV1,
    IncidentOpenedV1,
    IncidentProgressedV1,
    MigrationRequestedV1,
    ReturnToServiceRequestedV1,
)
from libs.common.events.scheduler import AllocationItem, WorkloadMigratingV1, WorkloadPlacedV1
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

Events = list[tuple[Envelope, Event]]

RESTARTED = "restarted from the start: p1 could not checkpoint: no checkpoint within 60s"


def _app(iso: Isolation) -> FastAPI:
    settings = iso.settings(RecoverySettings, "recovery", settle_s=0.5, tick_s=0.2, consume_samples=False)
    return create_app(settings)


def _placed(workload: str, tenant: str, *, gpu: str, node: str, placement: str) -> WorkloadPlacedV1:
    item = AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="A100-80GB")
    return WorkloadPlacedV1(
        workload_id=workload,
        tenant_id=tenant,
        placement_id=placement,
        node=node,
        allocations=[item],
        kind="job",
        priority=0.7,
    )


def _fault(fault_id: str, *, xid: int, gpu: str, node: str, ago_s: float = 1.0) -> FaultSignaledV1:
    at = datetime.now(UTC) - timedelta(seconds=ago_s)
    return FaultSignaledV1(fault_id=fault_id, kind="xid", xid=xid, gpu_uuid=gpu, node=node, at=at)


async def _send(iso: Isolation, topic: str, *payloads: Event) -> None:
    await publish(iso, [envelop(p, source="test") for p in payloads], topic=topic)


async def _placements_known(app: FastAPI, count: int) -> None:
    async def probe() -> bool:
        return int(await app.state.runtime.pool.fetchval("SELECT count(*) FROM placements")) >= count

    await eventually(probe, timeout=30, what=f"{count} placements recorded")


def _recovery_events(iso: Isolation) -> TopicReader:
    """A reader of the recovery topic, where the service's requests and incident progress appear."""
    return TopicReader(bootstrap=iso.infra.kafka, topic=iso.topic_prefix + topics.RECOVERY)


def _of(events: Events, cls: type[Any]) -> list[Any]:
    return [p for _, p in events if isinstance(p, cls)]


async def test_xid_79_drains_the_node_migrates_the_workload_reports_progress_and_closes_recovered(
    isolation: Isolation,
) -> None:
    app = _app(isolation)
    async with (
        running(app) as client,
        _recovery_events(isolation) as r,
    ):
        await _send(isolation, topics.SCHEDULER, _placed("w1", "acme", gpu="g1", node="n1", placement="p1"))
        await _placements_known(app, 1)
        sent_fault_at = datetime.now(UTC)
        await _send(isolation, topics.TELEMETRY_FAULTS, _fault("f1", xid=79, gpu="g1", node="n1"))

        events = await r.wait_for(lambda evs: bool(_of(evs, DrainRequestedV1)), timeout=30, what="drain")
        drain_seen_at = datetime.now(UTC)  # detection came before the drain it asked for
        drain = _of(events, DrainRequestedV1)[0]
        # The catalog's action for XID 79 is a node reboot, so the whole node is drained.
        assert (drain.node, drain.gpu_uuid, drain.target) == ("n1", None, "draining")

        health = GpuHealthChangedV1(
            gpu_uuid="g1", node="n1", previous="healthy", health="draining", reason="x"
        )
        await _send(isolation, topics.INVENTORY, health)
        events = await r.wait_for(lambda evs: bool(_of(evs, MigrationRequestedV1)), timeout=30, what="move")
        move = _of(events, MigrationRequestedV1)[0]
        assert (move.workload_id, move.tenant_id, move.away_from_gpu) == ("w1", "acme", "g1")
        assert move.incident_id == drain.incident_id

        steps: list[tuple[Literal["checkpoint", "transfer", "restore", "running"], int]] = [
            ("checkpoint", 20),
            ("transfer", 55),
            ("restore", 85),
            ("running", 100),
        ]
        migrating = WorkloadMigratingV1(
            workload_id="w1", tenant_id="acme", from_placement_id="p1", to_placement_id="p2"
        )
        await _send(isolation, topics.SCHEDULER, migrating)
        running_sent_at = datetime.now(UTC)  # recovery comes only with the "running" step sent here
        await _send(
            isolation,
            topics.NODE_AGENT,
            *[
                MigrationStepV1(
                    workload_id="w1",
                    tenant_id="acme",
                    placement_id="p2",
                    node="n2",
                    phase=p,
                    percent=n,
                    restored=False if p == "running" else None,
                    note=RESTARTED if p == "running" else "",
                )
                for p, n in steps
            ],
        )
        await _send(isolation, topics.SCHEDULER, _placed("w1", "acme", gpu="g2", node="n2", placement="p2"))

        events = await r.wait_for(lambda evs: bool(_of(evs, IncidentClosedV1)), timeout=30, what="closed")
        closed_seen_at = datetime.now(UTC)
        closed = _of(events, IncidentClosedV1)[0]
        assert closed.outcome == "recovered"
        # Detection to recovery: detected after the fault was sent and before the drain was seen;
        # recovered after the "running" step was sent and before the close was seen.
        assert closed.seconds_to_recover is not None
        assert (running_sent_at - drain_seen_at).total_seconds() <= closed.seconds_to_recover
        assert closed.seconds_to_recover <= (closed_seen_at - sent_fault_at).total_seconds()
        progress = [p for p in _of(events, IncidentProgressedV1) if p.workload_id == "w1"]
        assert [(p.phase, p.percent) for p in progress] == steps
        states = [p.state for p in _of(events, IncidentProgressedV1) if p.workload_id is None]
        assert states == ["detected", "diagnosing", "draining", "migrating", "verifying", "resolved"]
        assert [e.gpu_uuid for e in _of(events, ReturnToServiceRequestedV1)] == ["g1"]

        slo = (await client.get("/v1/stats/slo?period=1h", headers=ADMIN_HEADERS)).json()
        assert slo["overall"]["incidents"] == 1
        assert slo["overall"]["recovered"] == 1
        assert slo["overall"]["share_within_1m"] == 1.0
        assert slo["by_fault_type"]["xid_79"]["recovered"] == 1
        detail = (await client.get(f"/v1/incidents/{drain.incident_id}", headers=ADMIN_HEADERS)).json()
        assert detail["state"] == "resolved"
        assert [(m["workload_id"], m["phase"], m["percent"]) for m in detail["migrations"]] == [
            ("w1", "running", 100)
        ]
        # The host's word that the move restarted from the start reaches the incident people read.
        assert (detail["migrations"][0]["restored"], detail["migrations"][0]["note"]) == (False, RESTARTED)
        assert progress[-1].detail == f"w1: running 100% ({RESTARTED})"
        metrics = (await client.get("/metrics")).text
        assert 'recovery_incidents_closed_total{fault_type="xid_79",outcome="recovered"}' in metrics


async def test_a_repeat_folds_into_its_incident_and_a_tenant_sees_only_its_own_incidents(
    isolation: Isolation,
) -> None:
    app = _app(isolation)
    async with (
        running(app) as client,
        _recovery_events(isolation) as r,
    ):
        key = await provision_tenant(isolation, "acme")
        await _send(
            isolation,
            topics.SCHEDULER,
            _placed("wa", "acme", gpu="ga", node="na", placement="pa"),
            _placed("wb", "beta", gpu="gb", node="nb", placement="pb"),
        )
        await _placements_known(app, 2)
        await _send(isolation, topics.TELEMETRY_FAULTS, _fault("f1", xid=48, gpu="ga", node="na", ago_s=2))
        await _send(isolation, topics.TELEMETRY_FAULTS, _fault("f2", xid=48, gpu="gb", node="nb", ago_s=2))
        await _send(isolation, topics.TELEMETRY_FAULTS, _fault("f3", xid=48, gpu="ga", node="na", ago_s=1))

        async def folded() -> list[dict[str, Any]] | None:
            listed = (await client.get("/v1/incidents?gpu=ga", headers=ADMIN_HEADERS)).json()
            return listed if listed and listed[0]["count"] == 2 else None

        listed = await eventually(folded, timeout=30, what="the repeat folded")
        events = await r.wait_for(lambda evs: len(_of(evs, DrainRequestedV1)) >= 2, timeout=30, what="drains")
        drains = _of(events, DrainRequestedV1)
        assert sorted(d.gpu_uuid for d in drains) == ["ga", "gb"]  # no second drain for the repeat
        assert len(_of(events, IncidentOpenedV1)) == 2

        await eventually(lambda: key_works(client, key, "/v1/incidents"), timeout=30, what="tenant key")
        tenant = {"X-API-Key": key}
        mine = (await client.get("/v1/incidents", headers=tenant)).json()
        assert [i["gpu"] for i in mine] == ["ga"]
        everyone = (await client.get("/v1/incidents", headers=ADMIN_HEADERS)).json()
        other = next(i["incident_id"] for i in everyone if i["gpu"] == "gb")
        assert (await client.get(f"/v1/incidents/{other}", headers=tenant)).status_code == 404
        own = await client.get(f"/v1/incidents/{listed[0]['incident_id']}", headers=tenant)
        assert own.status_code == 200
        assert own.json()["count"] == 2


async def test_bad_filters_are_refused_with_422_naming_the_field(isolation: Isolation) -> None:
    app = _app(isolation)
    async with running(app) as client:
        cases = {
            "/v1/incidents?state=sleeping": "state",
            "/v1/incidents?limit=0": "limit",
            "/v1/incidents?fault_type=xid_9999": "fault_type",
            "/v1/stats/slo?period=forever": "period",
            "/v1/stats/slo?fault_type=nope": "fault_type",
        }
        for path, field in cases.items():
            response = await client.get(path, headers=ADMIN_HEADERS)
            assert response.status_code == 422, path
            assert response.json()["error"]["field"] == field, path
        missing = await client.get("/v1/catalog/faults/xid_9999", headers=ADMIN_HEADERS)
        assert missing.status_code == 404
        assert missing.json()["error"]["field"] == "key"
        assert (await client.get("/v1/incidents")).status_code == 401


def _health(gpu: str, node: str, *, previous: GpuHealth, health: GpuHealth) -> GpuHealthChangedV1:
    return GpuHealthChangedV1(gpu_uuid=gpu, node=node, previous=previous, health=health, reason="x")


async def test_a_workload_reported_on_a_gpu_after_its_incident_escalated_is_moved_off_it(
    isolation: Isolation,
) -> None:
    app = _app(isolation)
    async with running(app), _recovery_events(isolation) as r:
        ecc = FaultSignaledV1(fault_id="f1", kind="ecc", gpu_uuid="g1", node="n1", at=datetime.now(UTC))
        await _send(isolation, topics.TELEMETRY_FAULTS, ecc)
        events = await r.wait_for(lambda evs: bool(_of(evs, DrainRequestedV1)), timeout=30, what="drain")
        drain = _of(events, DrainRequestedV1)[0]
        assert (drain.gpu_uuid, drain.target) == ("g1", "failed")
        await _send(isolation, topics.INVENTORY, _health("g1", "n1", previous="healthy", health="failed"))
        events = await r.wait_for(lambda evs: bool(_of(evs, IncidentClosedV1)), timeout=30, what="closed")
        assert _of(events, IncidentClosedV1)[0].outcome == "escalated"  # nothing ran there: closed at once

        # The scheduler had placed w1 on g1 before it saw the drain; recovery hears of it only now.
        await _send(isolation, topics.SCHEDULER, _placed("w1", "acme", gpu="g1", node="n1", placement="p1"))
        events = await r.wait_for(lambda evs: bool(_of(evs, MigrationRequestedV1)), timeout=30, what="move")
        move = _of(events, MigrationRequestedV1)[0]
        assert (move.workload_id, move.away_from_gpu, move.incident_id) == ("w1", "g1", drain.incident_id)
        assert len(_of(events, IncidentClosedV1)) == 1


async def test_a_second_fault_on_a_gpu_already_drained_goes_on_without_a_health_change(
    isolation: Isolation,
) -> None:
    app = _app(isolation)
    async with running(app), _recovery_events(isolation) as r:
        await _send(isolation, topics.TELEMETRY_FAULTS, _fault("f1", xid=48, gpu="g1", node="n1"))
        await r.wait_for(lambda evs: bool(_of(evs, DrainRequestedV1)), timeout=30, what="first drain")
        await _send(isolation, topics.INVENTORY, _health("g1", "n1", previous="healthy", health="draining"))
        await _send(isolation, topics.TELEMETRY_FAULTS, _fault("f2", xid=63, gpu="g1", node="n1", ago_s=0))

        def second_migrating(evs: Events) -> bool:
            second = {o.incident_id for o in _of(evs, IncidentOpenedV1) if o.fault_type == "xid_63"}
            return any(
                p.incident_id in second and p.state == "migrating" and p.workload_id is None
                for p in _of(evs, IncidentProgressedV1)
            )

        # Inventory reports nothing for draining a GPU that is draining already: no event is sent here.
        events = await r.wait_for(second_migrating, timeout=30, what="the second incident past draining")
        second = next(o.incident_id for o in _of(events, IncidentOpenedV1) if o.fault_type == "xid_63")
        states = [p.state for p in _of(events, IncidentProgressedV1) if p.incident_id == second]
        assert states[:4] == ["detected", "diagnosing", "draining", "migrating"]


async def test_a_gpu_lost_reading_folds_into_the_xid_79_incident_of_its_gpu(isolation: Isolation) -> None:
    app = _app(isolation)
    async with running(app) as client:
        await _send(isolation, topics.SCHEDULER, _placed("w1", "acme", gpu="g1", node="n1", placement="p1"))
        await _placements_known(app, 1)
        await _send(isolation, topics.TELEMETRY_FAULTS, _fault("f1", xid=79, gpu="g1", node="n1"))
        lost = FaultSignaledV1(fault_id="f2", kind="lost", gpu_uuid="g1", node="n1", at=datetime.now(UTC))
        await _send(isolation, topics.TELEMETRY_FAULTS, lost)

        async def folded() -> list[dict[str, Any]] | None:
            listed = (await client.get("/v1/incidents?node=n1", headers=ADMIN_HEADERS)).json()
            return listed if listed and listed[0]["count"] == 2 else None

        listed = await eventually(folded, timeout=30, what="the lost reading folded")
        assert [(i["fault_type"], i["gpu"]) for i in listed] == [("xid_79", "g1")]


async def test_a_gpu_is_not_returned_to_service_while_another_incident_on_it_is_open(
    isolation: Isolation,
) -> None:
    app = _app(isolation)
    async with running(app), _recovery_events(isolation) as r:
        await _send(isolation, topics.TELEMETRY_FAULTS, _fault("f1", xid=48, gpu="g1", node="n1"))
        await r.wait_for(lambda evs: len(_of(evs, DrainRequestedV1)) == 1, timeout=30, what="first drain")
        # A second, unrecoverable fault of the same GPU (ECC burst: it must go to failed), before the drain.
        ecc = FaultSignaledV1(fault_id="f2", kind="ecc", gpu_uuid="g1", node="n1", at=datetime.now(UTC))
        await _send(isolation, topics.TELEMETRY_FAULTS, ecc)
        events = await r.wait_for(
            lambda evs: len(_of(evs, DrainRequestedV1)) == 2, timeout=30, what="the second drain"
        )
        first = next(o.incident_id for o in _of(events, IncidentOpenedV1) if o.fault_type == "xid_48")
        # The GPU drains: the ECC incident escalates (a person must replace or clear the GPU) and the
        # XID 48 incident recovers. Its recovery must not hand the GPU back to the scheduler.
        await _send(isolation, topics.INVENTORY, _health("g1", "n1", previous="healthy", health="draining"))
        events = await r.wait_for(
            lambda evs: len(_of(evs, IncidentClosedV1)) == 2, timeout=30, what="both incidents closed"
        )
        outcomes = {c.incident_id: c.outcome for c in _of(events, IncidentClosedV1)}
        assert outcomes.pop(first) == "recovered"
        assert list(outcomes.values()) == ["escalated"]
        await asyncio.sleep(2.0)  # ticks are 0.2 s: a return would have been published by now
        for _ in range(5):
            await r.poll()
        assert _of(r.events, ReturnToServiceRequestedV1) == []
