"""A gateway app wired to fakes: the in-memory session store and services answered by httpx.MockTransport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from fastapi import FastAPI

from services.gateway.adapters.session_store_fake import FakeSessionStore
from services.gateway.adapters.upstream import Upstreams
from services.gateway.app import create_app
from services.gateway.service.context import GatewayContext, WebConfig
from services.gateway.service.live import LiveConfig, LiveHub
from services.gateway.service.sessions import Sessions
from services.gateway.settings import GatewaySettings

__all__ = ["ADMIN_KEY", "TENANT_KEY", "FakeServices", "gateway_app"]

TENANT_KEY = "acme-key-0123456789"
ADMIN_KEY = "admin-key-0123456789"
_WHO = {
    TENANT_KEY: {"key_id": "k-acme", "tenant_id": "acme", "role": "tenant"},
    ADMIN_KEY: {"key_id": "admin", "tenant_id": None, "role": "admin"},
}
SAMPLE_ROWS = [{"gpu": "GPU-a", "node": "n1", "sm_util_pct": 50.0}, {"gpu": "GPU-b", "node": "n1"}]


@dataclass
class FakeServices:
    """The six services as one handler: records what it was sent, answers a few paths."""

    seen: list[httpx.Request] = field(default_factory=list)
    revoked: set[str] = field(default_factory=set)
    down: set[str] = field(default_factory=set)
    #: Services that do not know any key yet (it has not reached them through the platform topic).
    unaware: set[str] = field(default_factory=set)
    alerts: list[dict[str, object]] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        answer = self._route(request)
        # Streamed like a real transport's (a MockTransport body given as bytes counts as read already).
        if not answer.is_stream_consumed:
            return answer
        return httpx.Response(answer.status_code, headers=answer.headers, content=_chunks(answer.content))

    def _route(self, request: httpx.Request) -> httpx.Response:
        service = {
            8001 + i: s for i, s in enumerate(("inv", "scheduler", "telemetry", "alerting", "billing"))
        }
        name = service.get(request.url.port or 0, "recovery")
        if name in self.down:
            raise httpx.ConnectError("refused", request=request)
        key = request.headers.get("x-api-key", "")
        if key in self.revoked or key not in _WHO or name in self.unaware:
            return httpx.Response(401, json={"error": {"code": "unauthorized"}})
        self.seen.append(request)
        return self._answer(name, request, key)

    def _answer(self, name: str, request: httpx.Request, key: str) -> httpx.Response:
        path = request.url.path
        if path == "/v1/whoami":
            return httpx.Response(200, json=_WHO[key])
        if path == "/v1/stream":
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=self._events())
        if path == "/v1/alerts":
            return httpx.Response(200, json=self.alerts)
        if path == "/v1/incidents":
            return httpx.Response(200, json=[])
        if path == "/v1/exports/bill.csv":
            headers = {"content-disposition": 'attachment; filename="bill.csv"', "set-cookie": "x=1"}
            return httpx.Response(200, content=b"a,b\n1,2\n", headers={**headers, "content-type": "text/csv"})
        echo = {"method": request.method, "path": path, "query": str(request.url.query, "ascii")}
        return httpx.Response(200, json={**echo, "body": request.content.decode()})

    async def _events(self) -> AsyncIterator[bytes]:
        for _ in range(3):
            yield f"event: samples\ndata: {json.dumps({'samples': SAMPLE_ROWS})}\n\n".encode()


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    yield body


def gateway_app(services: FakeServices, *, console_dir: Path, **settings: object) -> tuple[FastAPI, LiveHub]:
    """The real app with its sessions in memory and its services faked; returns its live hub too."""
    values = GatewaySettings(console_dir=console_dir, **settings)  # type: ignore[arg-type]
    app = create_app(values)
    upstreams = Upstreams(
        client=httpx.AsyncClient(transport=httpx.MockTransport(services)), urls=values.upstreams
    )
    hub = LiveHub(
        upstreams=upstreams,
        config=LiveConfig(heartbeat_s=values.heartbeat_s, poll_s=0.01, resume_buffer=4, expiry_s=60),
    )
    app.state.gateway = GatewayContext(
        web=WebConfig(
            secure_cookies=values.secure_cookies,
            public_origin=values.public_origin,
            console_dir=console_dir,
            max_request_bytes=values.max_request_bytes,
        ),
        sessions=Sessions(store=FakeSessionStore(), whoami=upstreams.whoami, ttl_s=values.session_ttl_s),
        upstreams=upstreams,
        live=hub,
    )
    return app, hub
