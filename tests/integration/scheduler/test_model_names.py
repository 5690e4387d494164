"""GPU model names at submission: aliases ask for the canonical model; names nothing has are refused."""

from __future__ import annotations

from libs.common.events.scheduler import WorkloadPlacedV1
from services.scheduler.app import create_app
from tests.integration.scheduler.helpers import (
    capacity_known,
    create_tenant,
    of_workload,
    register_gpus,
    scheduler_reader,
    settings,
    spec,
)
from tests.integration.support import Isolation, running


async def test_an_alias_asks_for_the_canonical_model_and_is_placed_on_it(isolation: Isolation) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client, scheduler_reader(isolation) as reader:
        headers = await create_tenant(client, "acme")
        await register_gpus(isolation, count=2, model="H100-80GB-SXM")
        await capacity_known(client, headers, 2)

        created = await client.post("/v1/workloads", json=spec(model="H100-80GB"), headers=headers)

        assert created.status_code == 201, created.text
        body = created.json()
        assert body["spec"]["resources"]["model"] == "H100-80GB-SXM"
        await reader.wait_for(
            lambda evs: any(isinstance(p, WorkloadPlacedV1) for p in of_workload(evs, body["workload_id"]))
        )
        pcie = await client.post("/v1/workloads", json=spec(model="NVIDIA A100 80GB PCIe"), headers=headers)
        assert pcie.status_code == 201, pcie.text
        assert pcie.json()["spec"]["resources"]["model"] == "A100-80GB"


async def test_a_model_neither_the_catalog_nor_the_fleet_has_is_refused_and_nothing_is_queued(
    isolation: Isolation,
) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client:
        headers = await create_tenant(client, "acme")
        await register_gpus(isolation, count=1, model="X9-site-name")
        await capacity_known(client, headers, 1)

        refused = await client.post("/v1/workloads", json=spec(model="B200"), headers=headers)
        site = await client.post("/v1/workloads", json=spec(model="X9-site-name"), headers=headers)

        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["field"] == "resources.model"
        assert "unknown GPU model 'B200'" in error["message"]
        assert "H100-80GB-SXM" in error["message"]
        assert "X9-site-name" in error["message"]
        assert site.status_code == 201, site.text  # a site's own model name, known from its GPUs
        listed = (await client.get("/v1/workloads", headers=headers)).json()
        assert [w["spec"]["resources"]["model"] for w in listed] == ["X9-site-name"]
