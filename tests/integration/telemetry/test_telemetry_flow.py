"""The telemetry service end to end: a simulated agent, the real broker, Redis and Postgres."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from libs.common.events import envelop, topics
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, WorkloadPlacedV1
from libs.common.events.telemetry import FaultSignaledV1, NodeRollupV1
from services.telemetry.adapters.sim.ids import gpu_uuid
from tests.integration.bus_fixtures import publish
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    TopicReader,
    eventually,
    key_works,
    provision_tenant,
)
from tests.integration.telemetry.stack import GPUS_IN_FLEET, telemetry_stack


async def _latest(client: httpx.AsyncClient) -> list[dict[str, object]]:
    response = await client.get("/v1/gpus/latest", headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text
    return list(response.json())


async def test_simulated_fleet_is_live_in_redis_rolled_up_exported_and_signals_xid_79(
    isolation: Isolation, tmp_path: Path
) -> None:
    async with telemetry_stack(isolation, tmp_path) as stack:
        client = stack.client

        async def all_gpus_live() -> list[dict[str, object]] | None:
            rows = await _latest(client)
            return rows if len(rows) == GPUS_IN_FLEET else None

        await eventually(all_gpus_live, timeout=40, interval=0.2, what="every GPU in Redis")
        # Live: every GPU's latest sample in Redis is less than 2 s old (agent samples every second).
        rows = await _latest(client)
        now = datetime.now(UTC)
        ages = [(now - datetime.fromisoformat(str(r["at"]))).total_seconds() for r in rows]
        assert max(ages) < 2.0, ages
        assert {r["gpu"] for r in rows} == {gpu_uuid(hostname="tnode-a", index=i) for i in range(4)} | {
            gpu_uuid(hostname="tnode-b", index=i) for i in range(2)
        }

        exposition = await client.get("/metrics/gpus", headers=ADMIN_HEADERS)
        assert exposition.status_code == 200
        families = {f.name: f for f in text_string_to_metric_families(exposition.text)}
        util = families["DCGM_FI_DEV_GPU_UTIL"]
        assert len(util.samples) == GPUS_IN_FLEET
        dcgm = {"gpu", "UUID", "device", "modelName", "Hostname"}
        assert set(util.samples[0].labels) == dcgm | {"uuid", "node", "model", "workload", "tenant"}
        assert families["DCGM_EXP_XID_ERRORS_TOTAL"].type == "counter"
        assert families["DCGM_FI_DEV_XID_ERRORS"].type == "gauge"

        target = gpu_uuid(hostname="tnode-a", index=0)

        async def history() -> list[dict[str, object]]:
            response = await client.get(f"/v1/gpus/{target}/history", headers=ADMIN_HEADERS)
            return list(response.json()) if response.status_code == 200 else []

        [window, *_] = await eventually(history, timeout=20, interval=0.3, what="a rollup in Postgres")
        stats = window["stats"]
        assert isinstance(stats, dict)
        assert set(stats["sm_util_pct"]) == {"avg", "max", "p95"}

        async with TopicReader(
            bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.TELEMETRY_ROLLUPS
        ) as rollups:
            await rollups.wait_for(
                lambda evs: any(isinstance(p, NodeRollupV1) for _, p in evs), timeout=20, what="NodeRollupV1"
            )

        injected = await client.post(
            "/v1/admin/sim/faults",
            headers=ADMIN_HEADERS,
            json={"gpu_uuid": target, "fault": "xid", "xid": 79},
        )
        assert injected.status_code == 202, injected.text
        async with TopicReader(
            bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.TELEMETRY_FAULTS
        ) as faults:
            events = await faults.wait_for(
                lambda evs: any(isinstance(p, FaultSignaledV1) and p.xid == 79 for _, p in evs),
                timeout=20,
                what="XID 79 on the faults topic",
            )
        fault = next(p for _, p in events if isinstance(p, FaultSignaledV1) and p.xid == 79)
        assert fault.gpu_uuid == target
        assert fault.node == "tnode-a"
        assert fault.kind == "xid"
        assert fault.evidence["xid"] == 79
        assert "fallen off the bus" in fault.evidence["description"]


async def test_bad_simulator_and_history_requests_get_field_errors(
    isolation: Isolation, tmp_path: Path
) -> None:
    async with telemetry_stack(isolation, tmp_path) as stack:
        client = stack.client
        gpu = gpu_uuid(hostname="tnode-a", index=1)
        bad_xid = await client.post(
            "/v1/admin/sim/faults", headers=ADMIN_HEADERS, json={"gpu_uuid": gpu, "fault": "xid", "xid": 999}
        )
        assert bad_xid.status_code == 422
        assert "xid must be one of" in bad_xid.json()["error"]["message"]
        bad_kind = await client.post(
            "/v1/admin/sim/faults", headers=ADMIN_HEADERS, json={"gpu_uuid": gpu, "fault": "melt"}
        )
        assert bad_kind.json()["error"]["field"] == "fault"
        bad_leak = await client.post(
            "/v1/admin/sim/faults",
            headers=ADMIN_HEADERS,
            json={"gpu_uuid": gpu, "fault": "memory_leak", "leak_pct_per_min": 0},
        )
        assert (bad_leak.status_code, bad_leak.json()["error"]["field"]) == (422, "leak_pct_per_min")
        leak_on_xid = await client.post(
            "/v1/admin/sim/faults",
            headers=ADMIN_HEADERS,
            json={"gpu_uuid": gpu, "fault": "xid", "leak_pct_per_min": 5},
        )
        assert leak_on_xid.status_code == 422
        assert "leak_pct_per_min is only for fault 'memory_leak'" in leak_on_xid.json()["error"]["message"]
        unknown = await client.post(
            "/v1/admin/sim/faults", headers=ADMIN_HEADERS, json={"gpu_uuid": "GPU-nope", "fault": "ecc_burst"}
        )
        assert unknown.status_code == 404
        assert unknown.json()["error"]["field"] == "gpu_uuid"
        end = datetime.now(UTC)
        backwards = await client.get(
            f"/v1/gpus/{gpu}/history",
            headers=ADMIN_HEADERS,
            params={"start": end.isoformat(), "end": (end - timedelta(minutes=1)).isoformat()},
        )
        assert backwards.status_code == 422
        assert backwards.json()["error"]["field"] == "start"
        assert (await client.get("/v1/gpus/latest")).status_code == 401


async def test_placed_job_starts_is_labelled_for_its_tenant_only_and_exits(
    isolation: Isolation, tmp_path: Path
) -> None:
    async with telemetry_stack(isolation, tmp_path) as stack:
        client = stack.client
        key = await provision_tenant(isolation, "acme")
        await eventually(lambda: key_works(client, key, "/v1/gpus/latest"), what="tenant key replicated")
        gpu = gpu_uuid(hostname="tnode-b", index=1)
        placed = WorkloadPlacedV1(
            workload_id="wl-1",
            tenant_id="acme",
            placement_id="pl-1",
            node="tnode-b",
            allocations=[AllocationItem(gpu_uuid=gpu, units=Decimal(8), model="L4")],
            kind="job",
            profile="interactive",  # 5 s start-up in the simulator
            duration_s=3.0,
        )
        started_at = time.monotonic()
        await publish(isolation, [envelop(placed, source="test")], topic=topics.SCHEDULER)
        tenant = {"X-API-Key": key}

        async def tenant_sees_only_its_gpu() -> bool:
            response = await client.get("/v1/gpus/latest", headers=tenant)
            rows = response.json()
            return [r["gpu"] for r in rows] == [gpu] and rows[0]["workload_id"] == "wl-1"

        await eventually(tenant_sees_only_its_gpu, timeout=20, interval=0.2, what="tenant view of its GPU")
        other = gpu_uuid(hostname="tnode-a", index=0)
        assert (await client.get(f"/v1/gpus/{other}/latest", headers=tenant)).status_code == 404
        assert (await client.post("/v1/admin/sim/faults", headers=tenant, json={})).status_code == 403
        stream = await client.get("/v1/stream", headers=tenant, params={"max_events": 2})
        assert stream.headers["content-type"].startswith("text/event-stream")
        frames = [f for f in stream.text.split("\n\n") if f.strip()]
        assert len(frames) == 2
        assert all(f.startswith("event: samples\ndata: ") for f in frames)
        streamed = [s for f in frames for s in json.loads(f.split("data: ", 1)[1])["samples"]]
        assert {s["gpu"] for s in streamed} == {gpu}
        # The rows as GET /v1/gpus/latest describes them, the derived framebuffer share included.
        for row in streamed:
            assert row["fb_used_pct"] == pytest.approx(100.0 * row["fb_used_bytes"] / row["fb_total_bytes"])
        # Named GPUs: only those of them the tenant may see; too many is refused, naming the parameter.
        named = await client.get(
            "/v1/stream", headers=tenant, params={"max_events": 1, "gpus": f"{other},{gpu}"}
        )
        assert [s["gpu"] for s in json.loads(named.text.split("data: ", 1)[1])["samples"]] == [gpu]
        too_many = ",".join(f"GPU-{i}" for i in range(257))
        refused = await client.get("/v1/stream", headers=tenant, params={"gpus": too_many})
        assert refused.status_code == 422
        assert refused.json()["error"]["field"] == "gpus"
        hints = await client.get("/v1/workloads/wl-1/hints", headers=tenant)
        assert hints.status_code == 200
        assert hints.json()["gpus"][0]["gpu_uuid"] == gpu
        assert hints.json()["gpus"][0]["samples"] >= 1

        async with TopicReader(
            bootstrap=isolation.infra.kafka, topic=isolation.topic_prefix + topics.NODE_AGENT
        ) as reports:
            events = await reports.wait_for(
                lambda evs: any(isinstance(p, WorkloadExitedV1) for _, p in evs),
                timeout=30,
                what="the job to start and exit",
            )
        mine = [p for _, p in events if isinstance(p, WorkloadStartedV1 | WorkloadExitedV1)]
        assert [type(p) for p in mine] == [WorkloadStartedV1, WorkloadExitedV1]
        exited = mine[1]
        assert isinstance(exited, WorkloadExitedV1)
        assert (exited.placement_id, exited.node, exited.outcome) == ("pl-1", "tnode-b", "completed")
        assert time.monotonic() - started_at >= 8.0 - 1.0  # start-up delay plus the job's duration


async def test_an_injected_xid_counts_up_from_its_zero_series_and_becomes_the_last_xid(
    isolation: Isolation, tmp_path: Path
) -> None:
    async with telemetry_stack(isolation, tmp_path) as stack:
        client = stack.client
        gpu = gpu_uuid(hostname="tnode-a", index=2)

        async def xid_series() -> dict[str, float] | None:
            """The GPU's XID 63 count and its last XID (the DCGM_FI_DEV_XID_ERRORS gauge)."""
            text = (await client.get("/metrics/gpus", headers=ADMIN_HEADERS)).text
            families = {f.name: f for f in text_string_to_metric_families(text)}
            names = ("DCGM_EXP_XID_ERRORS_TOTAL", "DCGM_FI_DEV_XID_ERRORS")
            series = {
                name: s.value
                for name in names
                for s in (families[name].samples if name in families else [])
                if s.labels["uuid"] == gpu and s.labels.get("xid", "63") == "63"
            }
            return series if len(series) == len(names) else None

        exported = await eventually(xid_series, timeout=40, interval=0.2, what="the GPU exported")
        assert exported == {"DCGM_EXP_XID_ERRORS_TOTAL": 0.0, "DCGM_FI_DEV_XID_ERRORS": 0.0}
        injected = await client.post(
            "/v1/admin/sim/faults", headers=ADMIN_HEADERS, json={"gpu_uuid": gpu, "fault": "xid", "xid": 63}
        )
        assert injected.status_code == 202, injected.text

        async def counted() -> dict[str, float] | None:
            series = await xid_series()
            return series if series and series["DCGM_EXP_XID_ERRORS_TOTAL"] else None

        assert await eventually(counted, timeout=20, interval=0.2, what="XID 63 exported") == {
            "DCGM_EXP_XID_ERRORS_TOTAL": 1.0,
            "DCGM_FI_DEV_XID_ERRORS": 63.0,
        }
