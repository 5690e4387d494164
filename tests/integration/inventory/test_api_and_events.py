"""Admin API refusals naming the field, tenant limits, agent discovery and recovery requests as events."""

from __future__ import annotations

from typing import Any

import httpx

from libs.common.events import topics
from libs.common.events.agent import DiscoveredGpu, NodeDiscoveredV1
from libs.common.events.inventory import GpuHealthChangedV1, GpuRegisteredV1, NodeRegisteredV1
from libs.common.events.recovery import DrainRequestedV1, ReturnToServiceRequestedV1
from services.inventory.adapters.fleet_yaml import gpu_uuid
from services.inventory.app import create_app
from services.inventory.settings import InventorySettings
from tests.integration.bus_fixtures import publish
from tests.integration.inventory.helpers import DEMO_FLEET, env
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    TopicReader,
    eventually,
    key_works,
    provision_tenant,
    running,
)

GPU = gpu_uuid(hostname="demo-a100-01", index=5)
YAML = {**ADMIN_HEADERS, "content-type": "application/yaml"}


def field_of(response: httpx.Response) -> Any:
    return response.json().get("error", {"field": response.text[:200]})["field"]


async def _refusals(client: httpx.AsyncClient) -> None:
    cases: list[tuple[str, str, dict[str, Any], int, str]] = [
        ("PUT", f"/v1/admin/gpus/{GPU}/mig", {"profiles": ["7g.80gb", "1g.10gb"]}, 422, "profiles"),
        ("PUT", f"/v1/admin/gpus/{GPU}/mig", {"profiles": ["1g.10gb@x"]}, 422, "profiles.0"),
        (
            "PUT",
            f"/v1/admin/gpus/{GPU}/time-slicing",
            {"ratio": 8, "workload_kind": "training"},
            422,
            "ratio",
        ),
        (
            "PUT",
            f"/v1/admin/gpus/{GPU}/time-slicing",
            {"ratio": 2, "workload_kind": "mining"},
            422,
            "workload_kind",
        ),
        ("POST", f"/v1/admin/gpus/{GPU}/drain", {}, 422, "reason"),
        ("POST", "/v1/admin/gpus/GPU-nope/drain", {"reason": "x"}, 404, "uuid"),
    ]
    for method, path, body, status, field in cases:
        response = await client.request(method, path, json=body, headers=ADMIN_HEADERS)
        assert (path, response.status_code, field_of(response)) == (path, status, field)
    for params, field in (({"model": "Voodoo2"}, "model"), ({"health": "sad"}, "health")):
        response = await client.get("/v1/gpus", params=params, headers=ADMIN_HEADERS)
        assert (response.status_code, field_of(response)) == (422, field)
    response = await client.get("/v1/capacity", params={"group_by": "planet"}, headers=ADMIN_HEADERS)
    assert (response.status_code, field_of(response)) == (422, "group_by")
    response = await client.post("/v1/admin/fleet", content=b"nodes: [{hostname: x}]", headers=YAML)
    assert (response.status_code, field_of(response)) == (422, "body")
    response = await client.post(
        "/v1/admin/fleet", content=b"{}", headers={**ADMIN_HEADERS, "content-type": "image/png"}
    )
    assert (response.status_code, field_of(response)) == (422, "content-type")


async def test_bad_admin_inputs_get_4xx_naming_the_field_and_tenants_cannot_drain(
    isolation: Isolation,
) -> None:
    app = create_app(isolation.settings(InventorySettings, "inventory"))
    async with running(app) as client:
        response = await client.post("/v1/admin/fleet", content=DEMO_FLEET.read_bytes(), headers=YAML)
        assert response.json()["gpus_changed"] == 16
        await _refusals(client)
        warned = await client.put(
            f"/v1/admin/gpus/{GPU}/time-slicing",
            json={"ratio": 8, "workload_kind": "inference"},
            headers=ADMIN_HEADERS,
        )
        assert warned.status_code == 200
        assert "exceeds 1:4" in warned.json()["warnings"][0]
        assert len(warned.json()["partitions"]) == 8

        key = await provision_tenant(isolation, "acme")
        await eventually(lambda: key_works(client, key, "/v1/capacity"), what="tenant key replicated")
        tenant = {"X-API-Key": key}
        denied = await client.post(f"/v1/admin/gpus/{GPU}/drain", json={"reason": "mine"}, headers=tenant)
        assert denied.status_code == 403
        catalog = await client.get("/v1/catalog/A100-40GB", headers=tenant)
        assert ["1g.5gb"] * 7 in catalog.json()["mig_layouts"]
        assert (await client.get("/v1/gpus", params={"model": "H100-80GB"}, headers=tenant)).json()[0][
            "model"
        ] == ("H100-80GB-SXM")


def _discovery(labels: dict[str, str]) -> NodeDiscoveredV1:
    gpus = [
        DiscoveredGpu(
            uuid=f"GPU-edge-{i}", index=i, model="NVIDIA L4", memory_bytes=24 * 1024**3, pci_bus_id=f"0:{i}"
        )
        for i in range(2)
    ]
    return NodeDiscoveredV1(node="edge-01", labels=labels, gpus=gpus, source="simulated")


async def test_agent_rediscovery_emits_only_changes_and_recovery_drains_and_returns_gpus(
    isolation: Isolation,
) -> None:
    app = create_app(isolation.settings(InventorySettings, "inventory"))
    topic = isolation.topic_prefix + topics.INVENTORY
    async with running(app), TopicReader(bootstrap=isolation.infra.kafka, topic=topic) as reader:
        first = _discovery({"zone": "par-1", "pool": "edge"})
        changed = _discovery({"zone": "par-1", "pool": "edge", "region": "eu"})
        # Identical re-discovery (fresh envelope id), then a label change on the same node key.
        await publish(isolation, [env(first), env(first), env(changed)], topic=topics.NODE_AGENT)
        events = await reader.wait_for(
            lambda evs: sum(isinstance(p, NodeRegisteredV1) for _, p in evs) == 2,
            what="two node registrations",
        )
        assert sum(isinstance(p, GpuRegisteredV1) for _, p in events) == 2
        assert [p.labels["region"] for _, p in events if isinstance(p, NodeRegisteredV1)] == ["default", "eu"]

        drain = DrainRequestedV1(incident_id="i1", node="edge-01", reason="xid 79", target="failed")
        back = ReturnToServiceRequestedV1(incident_id="i1", gpu_uuid="GPU-edge-1", node="edge-01")
        await publish(isolation, [env(drain), env(back)], topic=topics.RECOVERY)

        def health(evs: list[Any]) -> list[tuple[str, str]]:
            return [(p.gpu_uuid, p.health) for _, p in evs if isinstance(p, GpuHealthChangedV1)]

        events = await reader.wait_for(lambda evs: len(health(evs)) == 3, what="node failed, one GPU back")
        assert sorted(health(events)) == [
            ("GPU-edge-0", "failed"),
            ("GPU-edge-1", "failed"),
            ("GPU-edge-1", "healthy"),
        ]
