"""A fleet file sent to inventory's admin endpoint cannot stall the service, and unsafe YAML is named.

A "billion laughs" document (700 bytes whose aliases expand to 9^9 strings) once blocked inventory's
event loop for 13-32 s; now it is refused at the alias that crosses the bound, and parsing runs in a
worker thread, so /healthz answers meanwhile.
"""

from __future__ import annotations

import asyncio

from services.inventory.app import create_app
from services.inventory.settings import InventorySettings
from tests.integration.support import ADMIN_HEADERS, Isolation, running

YAML = {**ADMIN_HEADERS, "content-type": "application/yaml"}


def billion_laughs() -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 9)]
    return "\n".join(lines) + "\n"


async def test_a_billion_laughs_fleet_file_is_refused_while_the_service_keeps_answering(
    isolation: Isolation,
) -> None:
    async with running(create_app(isolation.settings(InventorySettings, "inventory"))) as client:
        fleet = asyncio.create_task(client.post("/v1/admin/fleet", content=billion_laughs(), headers=YAML))
        health = await client.get("/healthz")
        refused = await fleet
        assert health.status_code == 200
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["field"] == "body"
        assert "aliases expand to more than 100000 nodes (line 6, column 10)" in error["message"]

        tagged = "nodes:\n  - hostname: !!python/object/apply:os.system ['touch /tmp/pwned']\n"
        refused = await client.post("/v1/admin/fleet", content=tagged, headers=YAML)
        assert refused.status_code == 422, refused.text
        assert "tag !!python/object/apply:os.system is not allowed" in refused.json()["error"]["message"]
        assert (await client.get("/v1/nodes", headers=ADMIN_HEADERS)).json() == []
