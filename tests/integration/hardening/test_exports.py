"""An export that cannot be built gives its pooled connection back, and project names are a safe set.

A project name with control or non-Latin-1 characters once made the export's Content-Disposition header
fail after the export had taken a connection and opened its transaction; nine such requests left billing's
pool idle in transaction and billing not ready for everyone.
"""

from __future__ import annotations

import contextlib

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from starlette.types import Message

from services.billing.api import exports
from services.billing.app import create_app
from services.billing.settings import BillingSettings
from tests.integration.support import ADMIN_HEADERS, Isolation, running

UNSAFE = ["a%01%1bb", "%E2%80%AE%F0%9F%98%80", "caf%C3%A9", "a%0Ab", "%7F"]
WINDOW = "tenant_id=acme&start=2025-03-01T00:00:00Z&end=2025-03-02T00:00:00Z"


async def _idle_in_transaction(iso: Isolation) -> int:
    conn = await asyncpg.connect(iso.infra.database_url)
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in%'",
            f"gpucloud-{iso.schema('billing')}",
        )
        return count
    finally:
        await conn.close()


async def _still_ready(client: httpx.AsyncClient, iso: Isolation) -> None:
    ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert await _idle_in_transaction(iso) == 0


def _settings(iso: Isolation) -> BillingSettings:
    return iso.settings(BillingSettings, "billing", accrual_interval_s=3600, db_pool_max=9)


async def test_nine_exports_of_unsafe_project_names_are_refused_and_billing_stays_ready(
    isolation: Isolation,
) -> None:
    async with running(create_app(_settings(isolation))) as client:
        for i in range(9):
            response = await client.get(
                f"/v1/exports/{UNSAFE[i % len(UNSAFE)]}?{WINDOW}", headers=ADMIN_HEADERS
            )
            assert response.status_code == 422, response.text
            assert response.json()["error"]["field"] == "project"
        await _still_ready(client, isolation)


async def test_a_nul_in_a_ledger_filter_is_422_not_a_database_error(isolation: Isolation) -> None:
    async with running(create_app(_settings(isolation))) as client:
        response = await client.get("/v1/ledger/entries?project=a%00b", headers=ADMIN_HEADERS)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == "project"


async def test_an_export_that_fails_after_taking_its_connection_gives_it_back(
    isolation: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def totals_fail(*_: object) -> None:
        raise RuntimeError("the totals query failed")

    async with running(create_app(_settings(isolation))) as client:
        with monkeypatch.context() as patch:
            patch.setattr(exports, "export_totals", totals_fail)
            for _ in range(10):
                with pytest.raises(RuntimeError, match="totals"):
                    await client.get(f"/v1/exports/vision?{WINDOW}", headers=ADMIN_HEADERS)
        await _still_ready(client, isolation)
        with monkeypatch.context() as patch:  # a header that cannot be encoded, as the old one could not
            patch.setattr(exports, "content_disposition", lambda name: f'attachment; filename="\u202e{name}"')
            for _ in range(10):
                with pytest.raises(UnicodeEncodeError):
                    await client.get(f"/v1/exports/vision?{WINDOW}", headers=ADMIN_HEADERS)
        await _still_ready(client, isolation)

        fine = await client.get(f"/v1/exports/vision?{WINDOW}", headers=ADMIN_HEADERS)
        assert fine.status_code == 200, fine.text
        assert fine.headers["content-disposition"] == (
            'attachment; filename="vision_2025-03-01_2025-03-02.csv"; '
            "filename*=UTF-8''vision_2025-03-01_2025-03-02.csv"
        )
        await _still_ready(client, isolation)


async def _leave_after_the_first_piece(app: FastAPI) -> None:
    """One export over raw ASGI (spec 2.4) whose client is gone once the body starts."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/v1/exports/vision",
        "raw_path": b"/v1/exports/vision",
        "root_path": "",
        "query_string": WINDOW.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in ADMIN_HEADERS.items()],
        "client": ("127.0.0.1", 1),
        "server": ("service", 80),
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            raise OSError("the client went away")

    with contextlib.suppress(Exception):
        await app(scope, receive, send)


async def test_an_export_whose_client_leaves_mid_stream_gives_its_connection_back(
    isolation: Isolation,
) -> None:
    app = create_app(_settings(isolation))
    async with running(app) as client:
        for _ in range(10):
            await _leave_after_the_first_piece(app)
        await _still_ready(client, isolation)
