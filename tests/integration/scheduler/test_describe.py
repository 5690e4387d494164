"""Describe what you need, through the HTTP API: a persisted draft, tenant isolation, and the queue preview
agreeing with the positions the placer gives real submissions."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from services.scheduler.app import create_app
from tests.integration.scheduler.helpers import capacity_known, create_tenant, register_gpus, settings, spec
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually, running

pytestmark = pytest.mark.integration
DESCRIBE = "/v1/workloads/drafts/describe"


async def test_a_description_opens_a_persisted_draft_that_can_be_finished_and_submitted(
    isolation: Isolation,
) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client:
        acme = await create_tenant(client, "acme")
        await register_gpus(isolation, count=1, model="A100-80GB")
        await capacity_known(client, acme, 1)
        for text in ("give me a GPU that can run BERT", "给我分配一个能跑BERT的GPU"):
            made = await client.post(DESCRIBE, json={"text": text}, headers=acme)
            assert made.status_code == 201, made.text
            body = made.json()
            assert body["not_understood"] == []
            # The fleet's model is preferred: every model fits BERT inference, and it is the one there is.
            resources = body["draft"]["steps"]["resources"]
            assert (resources["kind"], resources["model"], resources["count"]) == ("gpu", "A100-80GB", 1)
            assert any(r["phrase"] == "BERT" and "GB" in r["meaning"] for r in body["reading"])
            assert body["draft"]["missing"] == ["image", "network"]
            draft_id = body["draft"]["draft_id"]
            shown = await client.get(f"/v1/workloads/drafts/{draft_id}", headers=acme)
            assert shown.status_code == 200, shown.text
            assert shown.json() == body["draft"]
        for step, payload in (
            ("image", {"name": "pytorch", "version": "2.4"}),
            ("network", spec()["network"]),
        ):
            filled = await client.put(f"/v1/workloads/drafts/{draft_id}/{step}", json=payload, headers=acme)
            assert filled.status_code == 200, filled.text
        submitted = await client.post(f"/v1/workloads/drafts/{draft_id}/submit", headers=acme)
        assert submitted.status_code == 201, submitted.text


async def test_bad_text_is_a_422_naming_text_and_opens_no_draft(isolation: Isolation) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client:
        acme = await create_tenant(client, "acme")
        for body in ({"text": ""}, {"text": "   "}, {"text": "x" * 2001}, {}, {"text": 7}):
            refused = await client.post(DESCRIBE, json=body, headers=acme)
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"]["field"] == "text"
        extra = await client.post(DESCRIBE, json={"text": "BERT", "mode": "x"}, headers=acme)
        assert extra.status_code == 422
        assert extra.json()["error"]["field"] == "mode"


async def test_a_described_draft_belongs_to_its_tenant(isolation: Isolation) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client:
        acme, globex = await create_tenant(client, "acme"), await create_tenant(client, "globex")
        made = await client.post(DESCRIBE, json={"text": "train resnet50 with pytorch"}, headers=acme)
        assert made.status_code == 201, made.text
        draft = made.json()["draft"]
        assert draft["tenant_id"] == "acme"
        assert (
            await client.get(f"/v1/workloads/drafts/{draft['draft_id']}", headers=globex)
        ).status_code == 404
        # A tenant key cannot describe for another tenant; an admin must say which tenant.
        other = await client.post(f"{DESCRIBE}?tenant_id=acme", json={"text": "BERT"}, headers=globex)
        assert other.status_code == 403, other.text
        unnamed = await client.post(DESCRIBE, json={"text": "BERT"}, headers=ADMIN_HEADERS)
        assert unnamed.status_code == 422
        assert unnamed.json()["error"]["field"] == "tenant_id"
        named = await client.post(
            f"{DESCRIBE}?tenant_id=globex", json={"text": "BERT"}, headers=ADMIN_HEADERS
        )
        assert named.status_code == 201, named.text
        assert named.json()["draft"]["tenant_id"] == "globex"


async def _positions(client: httpx.AsyncClient, headers: dict[str, str], count: int) -> dict[str, int]:
    """Each waiting workload's position once the placer has recorded one for all ``count``."""

    async def probe() -> dict[str, int] | None:
        rows = (await client.get("/v1/queue", headers=headers)).json()
        if len(rows) != count or any(r["position"] is None for r in rows):
            return None
        return {r["workload_id"]: r["position"] for r in rows}

    return await eventually(probe, timeout=30, what=f"{count} queue positions")


async def _preview(client: httpx.AsyncClient, headers: dict[str, str], **query: Any) -> dict[str, Any]:
    answer = await client.get("/v1/queue/preview", params=query, headers=headers)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def _submit(client: httpx.AsyncClient, headers: dict[str, str], **extra: Any) -> str:
    made = await client.post("/v1/workloads", json=spec(**extra), headers=headers)
    assert made.status_code == 201, made.text
    wid: str = made.json()["workload_id"]
    return wid


async def test_the_preview_position_is_the_one_a_submission_then_gets(isolation: Isolation) -> None:
    # No GPUs: everything waits, and the placer records each waiting workload's position.
    app = create_app(settings(isolation))
    async with running(app) as client:
        acme = await create_tenant(client, "acme")
        first, second = await _submit(client, acme), await _submit(client, acme)
        assert await _positions(client, acme, 2) == {first: 1, second: 2}

        normal = await _preview(client, acme, priority="normal", gpu_model="A100-80GB")
        assert (normal["position"], normal["ahead"], normal["same_model_ahead"]) == (3, 2, 2)
        assert normal["priority"] == "normal"
        assert "2 waiting workloads come before it" in normal["explanation"]

        high = await _preview(client, acme, priority="high", gpu_model="A100-80GB", gpu_count=2)
        assert (high["position"], high["ahead"]) == (1, 0)
        urgent = await _submit(
            client, acme, urgency=1.0, resources={"kind": "gpu", "model": "A100-80GB", "count": 2}
        )
        assert (await _positions(client, acme, 3))[urgent] == high["position"]

        low = await _preview(client, acme, priority="low", gpu_model="H100-80GB-SXM")
        assert (low["position"], low["same_model_ahead"]) == (4, 0)
        cheap = await _submit(
            client,
            acme,
            urgency=0.0,
            preemptible=True,
            resources={"kind": "gpu", "model": "H100-80GB-SXM", "count": 1},
        )
        assert (await _positions(client, acme, 4))[cheap] == low["position"]


async def test_the_preview_refuses_what_it_cannot_answer(isolation: Isolation) -> None:
    app = create_app(settings(isolation))
    async with running(app) as client:
        acme = await create_tenant(client, "acme")
        for query, field in (
            ({"priority": "vip"}, "priority"),
            ({"gpu_model": "Z9000"}, "gpu_model"),
            ({"gpu_count": 0}, "gpu_count"),
        ):
            refused = await client.get("/v1/queue/preview", params=query, headers=acme)
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"]["field"] == field
        admin = await client.get("/v1/queue/preview", headers=ADMIN_HEADERS)
        assert admin.status_code == 422
        assert admin.json()["error"]["field"] == "tenant_id"
        named = await client.get("/v1/queue/preview", params={"tenant_id": "acme"}, headers=ADMIN_HEADERS)
        assert named.status_code == 200, named.text
        assert named.json()["position"] == 1
