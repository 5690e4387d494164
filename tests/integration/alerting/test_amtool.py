"""Debian's amtool against the running service: silences and alerts, as on-call engineers use them."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from fastapi import FastAPI

from services.alerting.app import create_app
from services.alerting.domain.inhibition import DEFAULT_INHIBIT_RULES
from tests.integration.alerting.helpers import Feeder, add_memory_rule, alerting_settings
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    eventually,
    key_works,
    provision_tenant,
    running,
)

AMTOOL = shutil.which("amtool")
pytestmark = pytest.mark.skipif(
    AMTOOL is None,
    reason="amtool not installed (Debian prometheus-alertmanager; scripts/ensure-prometheus-tools.sh)",
)


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    """The app on a real port (its lifespan run by `running`), for a client that is not in this process."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: _started(server), timeout=5, what="uvicorn listening")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def _started(server: uvicorn.Server) -> bool:
    return server.started


class Amtool:
    """`amtool --alertmanager.url=URL` run as a subprocess, with a tenant's key as its bearer token."""

    def __init__(self, url: str, config: Path) -> None:
        self.base = [str(AMTOOL), f"--alertmanager.url={url}", f"--http.config.file={config}"]

    async def __call__(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            *self.base, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout=10)
        assert proc.returncode == 0, f"amtool {' '.join(args)}: {err.decode()}"
        return out.decode()

    async def json(self, *args: str) -> Any:
        return json.loads(await self(*args, "-o", "json"))


async def _silence(client: httpx.AsyncClient, key: str, silence_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/silences/{silence_id}", headers={"X-API-Key": key})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_amtool_adds_queries_and_expires_a_silence_and_lists_a_firing_alert(
    isolation: Isolation, tmp_path: Path
) -> None:
    app = create_app(alerting_settings(isolation))
    feeder = Feeder(isolation, node="am-node", mem_pct=95, tenant="acme")
    async with running(app) as client, serving(app) as url, feeder.running():
        key = await provision_tenant(isolation, "acme")
        await eventually(lambda: key_works(client, key, "/v1/alerts"), what="tenant key replicated")
        config = tmp_path / "amtool-http.yml"
        config.write_text(f"authorization:\n  credentials: {key}\n")
        amtool = Amtool(url, config)

        silence_id = (await amtool("silence", "add", "alertname=AmProbe", "-c", "drain", "-d", "1h")).strip()
        ours = await _silence(client, key, silence_id)
        assert ours["active"]
        assert ours["comment"] == "drain"
        assert {"name": "tenant", "op": "=", "value": "acme"} in ours["matchers"]
        queried = await amtool.json("silence", "query", "alertname=AmProbe")
        assert [s["id"] for s in queried] == [silence_id]
        await amtool("silence", "expire", silence_id)
        assert not (await _silence(client, key, silence_id))["active"]
        assert await amtool.json("silence", "query", "alertname=AmProbe") == []
        expired = await amtool.json("silence", "query", "--expired", "alertname=AmProbe")
        assert [(s["id"], s["status"]["state"]) for s in expired] == [(silence_id, "expired")]

        await add_memory_rule(client, name="AmMemHigh", node="am-node", for_="0s")

        async def listed() -> list[Any]:
            found: list[Any] = await amtool.json("alert", "query", "alertname=AmMemHigh")
            return found

        [alert] = await eventually(listed, timeout=15, what="amtool alert query lists the firing alert")
        assert alert["labels"]["tenant"] == "acme"
        assert alert["labels"]["node"] == "am-node"
        assert alert["status"]["state"] == "active"
        muting = (await amtool("silence", "add", "alertname=AmMemHigh", "-c", "known", "-d", "1h")).strip()
        assert await amtool.json("alert", "query", "alertname=AmMemHigh") == []
        [muted] = await amtool.json("alert", "query", "--silenced", "alertname=AmMemHigh")
        assert muted["status"] == {"state": "suppressed", "silencedBy": [muting], "inhibitedBy": []}


async def test_the_v2_api_refuses_bad_input_with_alertmanagers_400_and_keeps_tenants_apart(
    isolation: Isolation,
) -> None:
    app = create_app(alerting_settings(isolation))
    async with running(app) as client:
        acme, other = await provision_tenant(isolation, "acme"), await provision_tenant(isolation, "other")
        await eventually(lambda: key_works(client, other, "/api/v2/silences"), what="tenant keys replicated")
        bearer = {"Authorization": f"Bearer {acme}"}
        bad_filter = await client.get("/api/v2/silences", params={"filter": "alertname"}, headers=bearer)
        assert (bad_filter.status_code, bad_filter.json()) == (
            400,
            "filter: bad matcher format: 'alertname'",
        )
        bad_flag = await client.get("/api/v2/alerts", params={"silenced": "maybe"}, headers=bearer)
        assert (bad_flag.status_code, bad_flag.json()) == (400, "silenced: 'maybe' is not a boolean")
        silence = {
            "matchers": [{"name": "alertname", "value": "X", "isRegex": False}],
            "startsAt": "2026-01-01T00:00:00Z",
            "endsAt": "2999-01-01T00:00:00Z",
            "createdBy": "me",
            "comment": "c",
        }
        escape = {**silence, "matchers": [{"name": "tenant", "value": "other", "isRegex": False}]}
        refused = await client.post("/api/v2/silences", json=escape, headers=bearer)
        assert (refused.status_code, refused.json()) == (
            400,
            "matchers.0: a tenant's matchers are confined to tenant 'acme'",
        )
        no_matchers = await client.post("/api/v2/silences", json={**silence, "matchers": []}, headers=bearer)
        assert no_matchers.status_code == 400
        assert no_matchers.json().startswith("matchers: ")

        created = await client.post("/api/v2/silences", json=silence, headers=bearer)
        first = created.json()["silenceID"]
        updated = await client.post(
            "/api/v2/silences", json={**silence, "id": first, "comment": "d"}, headers=bearer
        )
        second = updated.json()["silenceID"]
        states = {
            s["id"]: (s["status"]["state"], s["comment"])
            for s in (await client.get("/api/v2/silences", headers=bearer)).json()
        }
        assert states == {first: ("expired", "c"), second: ("active", "d")}
        others = {"Authorization": f"Bearer {other}"}
        assert (await client.get("/api/v2/silences", headers=others)).json() == []
        assert (await client.get(f"/api/v2/silence/{second}", headers=others)).status_code == 404
        assert (await client.delete(f"/api/v2/silence/{second}", headers=others)).status_code == 404
        status = (await client.get("/api/v2/status", headers=bearer)).json()
        assert status["cluster"]["status"] == "disabled"
        assert yaml.safe_load(status["config"]["original"]) == {"inhibit_rules": []}  # no receivers shown
        admin = (await client.get("/api/v2/status", headers=ADMIN_HEADERS)).json()
        shipped = yaml.safe_load(admin["config"]["original"])
        assert (shipped["route"]["receiver"], len(shipped["inhibit_rules"])) == (
            "default",
            len(DEFAULT_INHIBIT_RULES),
        )
