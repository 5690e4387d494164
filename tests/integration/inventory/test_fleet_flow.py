"""Acceptance: a 2x8 fleet file, MIG and drain as events, capacity from scheduler events, replays ignored."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx

from libs.common.events import topics
from libs.common.events.inventory import (
    GpuHealthChangedV1,
    GpuPartitionsChangedV1,
    GpuRegisteredV1,
    NodeRegisteredV1,
)
from services.inventory.adapters.fleet_yaml import gpu_uuid
from services.inventory.adapters.node_store import Store
from services.inventory.app import create_app
from services.inventory.domain.capacity import Ledger, capacity_summary
from services.inventory.domain.records import Allocation
from services.inventory.settings import InventorySettings
from tests.integration.bus_fixtures import publish
from tests.integration.inventory.helpers import DEMO_FLEET, capacity, ended, env, placed
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    TopicReader,
    eventually,
    key_works,
    provision_tenant,
    running,
)

A100 = "demo-a100-01"


def allocated(body: dict[str, Any]) -> Decimal:
    return Decimal(body["total"]["allocated_units"])


async def _mig_and_drain(client: httpx.AsyncClient, reader: TopicReader) -> dict[str, Any]:
    gpu0, gpu1 = gpu_uuid(hostname=A100, index=0), gpu_uuid(hostname=A100, index=1)
    layout = {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}
    response = await client.put(f"/v1/admin/gpus/{gpu0}/mig", json=layout, headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text
    mig: dict[str, Any] = response.json()
    assert sorted(p["profile"] for p in mig["partitions"]) == sorted(layout["profiles"])
    drain = {"reason": "fan noise"}
    response = await client.post(f"/v1/admin/gpus/{gpu1}/drain", json=drain, headers=ADMIN_HEADERS)
    assert response.json()["health"] == "draining"
    assert response.json()["health_history"][0]["reason"] == "fan noise"
    await reader.wait_for(
        lambda evs: (
            any(isinstance(p, GpuPartitionsChangedV1) and p.gpu_uuid == gpu0 for _, p in evs)
            and any(
                isinstance(p, GpuHealthChangedV1) and p.gpu_uuid == gpu1 and p.health == "draining"
                for _, p in evs
            )
        ),
        what="MIG and drain events",
    )
    return mig


async def _sql_matches_core(app: Any, body: dict[str, Any]) -> None:
    """The SQL summary equals the core's capacity_summary over the same rows."""
    runtime = app.state.runtime
    async with runtime.pool.acquire() as conn:
        hosts = [r["hostname"] for r in await conn.fetch("SELECT hostname FROM nodes")]
        async with conn.transaction():
            inventories = (await Store(conn).load_nodes(hostnames=hosts)).values()
        rows = await conn.fetch("SELECT * FROM allocations WHERE NOT released")
    ledger = Ledger(
        allocations={
            r["allocation_id"]: Allocation(
                allocation_id=r["allocation_id"],
                workload_id=r["workload_id"],
                gpu_uuid=r["gpu_uuid"],
                partition_id=r["partition_id"],
                units=r["units"],
            )
            for r in rows
        }
    )
    core = capacity_summary(inventories=inventories, ledger=ledger)
    assert Decimal(body["total"]["free_units"]) == core.total.free_units
    assert Decimal(body["total"]["fragmented_units"]) == core.total.fragmented_units
    assert body["total"]["free_gpus"] == core.total.free_gpus
    assert body["total"]["allocated_memory_mib"] == core.total.allocated_memory_mib
    assert Decimal(body["by_node"][A100]["total_units"]) == core.by_node[A100].total_units


async def _a_share_holds_its_part_of_the_memory(
    client: httpx.AsyncClient, *, whole: str, sliced: str
) -> None:
    """A 1:8 share's allocation holds an eighth of the card, not isolated; a whole GPU's all of it."""
    for gpu, part, isolated in ((sliced, 8, False), (whole, 1, True)):
        detail = (await client.get(f"/v1/gpus/{gpu}", headers=ADMIN_HEADERS)).json()
        [held] = detail["allocations"]
        assert (held["memory_mib"], held["memory_isolated"]) == (detail["memory_mib"] // part, isolated)
        assert detail["capacity"]["allocated_memory_mib"] == detail["memory_mib"] // part


async def test_fleet_file_mig_drain_and_allocations_flow_through_events_exactly_once(
    isolation: Isolation,
) -> None:
    settings = isolation.settings(InventorySettings, "inventory", fleet_file=DEMO_FLEET)
    app = create_app(settings)
    topic = isolation.topic_prefix + topics.INVENTORY
    async with running(app) as client, TopicReader(bootstrap=isolation.infra.kafka, topic=topic) as reader:
        await reader.wait_for(
            lambda evs: (
                sum(isinstance(p, GpuRegisteredV1) for _, p in evs) == 16
                and sum(isinstance(p, NodeRegisteredV1) for _, p in evs) == 2
            ),
            what="the fleet file's 2 nodes and 16 GPUs registered",
        )
        again = await client.post(
            "/v1/admin/fleet",
            content=DEMO_FLEET.read_bytes(),
            headers={**ADMIN_HEADERS, "content-type": "application/yaml"},
        )
        assert again.json() == {"nodes": 2, "nodes_changed": 0, "gpus": 16, "gpus_changed": 0, "events": 0}

        mig = await _mig_and_drain(client, reader)
        before = await capacity(client)
        assert before["total"]["unavailable_gpus"] == 1
        assert allocated(before) == 0

        small = next(p for p in mig["partitions"] if p["profile"] == "1g.10gb")
        whole, sliced = gpu_uuid(hostname=A100, index=2), gpu_uuid(hostname=A100, index=4)
        eighths = {"ratio": 8, "workload_kind": "inference"}
        response = await client.put(
            f"/v1/admin/gpus/{sliced}/time-slicing", json=eighths, headers=ADMIN_HEADERS
        )
        assert response.status_code == 200, response.text
        first = placed(
            workload="w1",
            placement="p1",
            # The scheduler names a share by its own slot id, not by inventory's partition id.
            items=[(whole, None, "8"), (mig["uuid"], small["id"], small["units"]), (sliced, "share:3", "1")],
        )
        envelope = env(first)
        await publish(isolation, [envelope, envelope, env(first)], topic=topics.SCHEDULER)
        # Same workload key, so this arrives after the replays: once it shows, they were processed.
        marker = placed(workload="w1", placement="p2", items=[(gpu_uuid(hostname=A100, index=3), None, "1")])
        await publish(isolation, [env(marker)], topic=topics.SCHEDULER)
        expected = Decimal(8) + Decimal(small["units"]) + 1 + 1

        async def settled() -> dict[str, Any] | None:
            body = await capacity(client)
            return body if allocated(body) >= expected else None

        body = await eventually(settled, what="allocations applied", timeout=30)
        assert allocated(body) == expected
        assert body["by_node"][A100]["in_use_gpus"] == 4
        await _sql_matches_core(app, body)
        await _a_share_holds_its_part_of_the_memory(client, whole=whole, sliced=sliced)

        busy = await client.put(
            f"/v1/admin/gpus/{mig['uuid']}/mig", json={"profiles": []}, headers=ADMIN_HEADERS
        )
        assert busy.status_code == 409
        assert busy.json()["error"]["field"] == "uuid"

        key = await provision_tenant(isolation, "other")
        await eventually(lambda: key_works(client, key, "/v1/capacity"), what="tenant key replicated")
        seen = await client.get(f"/v1/gpus/{whole}", headers={"X-API-Key": key})
        assert seen.status_code == 200
        assert seen.json()["allocations"] == []
        admin_view = await client.get(f"/v1/gpus/{whole}", headers=ADMIN_HEADERS)
        assert [a["tenant_id"] for a in admin_view.json()["allocations"]] == ["acme"]

        await publish(isolation, [env(ended(workload="w1", placement="p1"))], topic=topics.SCHEDULER)

        async def freed() -> bool:
            return allocated(await capacity(client)) == 1

        await eventually(freed, what="the ended placement freed", timeout=30)
        await publish(isolation, [env(first)], topic=topics.SCHEDULER)  # a late replay stays dead
        await publish(isolation, [env(ended(workload="w1", placement="p2"))], topic=topics.SCHEDULER)

        async def all_free() -> bool:
            return allocated(await capacity(client)) == 0

        await eventually(all_free, what="every placement freed, the late replay ignored", timeout=30)
