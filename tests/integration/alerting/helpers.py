"""A local HTTP receiver that records webhooks, a sample feeder, and the alerting app's test settings."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from libs.common.bus import create_producer
from libs.common.events import encode, envelop, topics
from libs.common.events.telemetry import GpuMetrics, SampleBatchV1
from libs.devkit.broker import free_port
from services.alerting.app import create_app
from services.alerting.settings import AlertingSettings
from tests.integration.support import ADMIN_HEADERS, Isolation, running

SECRET = "test-signing-secret-0123456789"
GIB = 1024**3


def alerting_settings(iso: Isolation, **overrides: Any) -> AlertingSettings:
    """Fast timers: ticks every 100 ms; retries start at 200 ms and cap at 1 s (production: 1 s / 5 m)."""
    values: dict[str, Any] = {
        "tick_interval_s": 0.1,
        "delivery_poll_s": 0.1,
        "retry_base_s": 0.2,
        "retry_cap_s": 1.0,
        **overrides,
    }
    return iso.settings(AlertingSettings, "alerting", **values)


@dataclass
class Received:
    """One request the receiver got, and what it answered."""

    at: float
    headers: dict[str, str]
    body: bytes
    status: int

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Records every POST; answers `responder()`'s status (200 by default)."""

    port: int
    responder: Callable[[], int] = lambda: 200
    requests: list[Received] = field(default_factory=list)
    _server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def accepted(self) -> list[Received]:
        return [r for r in self.requests if 200 <= r.status < 300]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status = self.responder()
                self.requests.append(Received(at=time.time(), headers=headers, body=body, status=status))
                writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n".encode())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def receiving(responder: Callable[[], int] = lambda: 200) -> AsyncIterator[Receiver]:
    receiver = Receiver(port=free_port(), responder=responder)
    await receiver.start()
    try:
        yield receiver
    finally:
        await receiver.stop()


def gpu(
    index: int, *, node: str, mem_pct: float, tenant: str | None = None, xids: dict[int, int] | None = None
) -> GpuMetrics:
    total = 80 * GIB
    return GpuMetrics(
        gpu=f"GPU-{node}-{index}",
        index=index,
        model="A100",
        fb_used_bytes=int(total * mem_pct / 100),
        fb_total_bytes=total,
        gpu_temp_c=60.0,
        xid_count=sum((xids or {}).values()),
        xid_counts=xids or None,
        ecc_dbe_count=0,
        throttle_reasons=0,
        tenant_id=tenant,
        workload_id="w1" if tenant else None,
    )


class Feeder:
    """Publishes one node's SampleBatchV1 every `period` seconds; `mem_pct` and `xids` (the GPU's XID
    counts by code) can change while it runs."""

    def __init__(self, iso: Isolation, *, node: str, mem_pct: float, tenant: str | None = None) -> None:
        self.iso, self.node, self.mem_pct, self.tenant = iso, node, mem_pct, tenant
        self.xids: dict[int, int] = {}
        self.sent: list[tuple[datetime, float]] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self, period: float) -> None:
        producer = create_producer(bootstrap=self.iso.infra.kafka, client_id="test-feeder")
        await producer.start()
        try:
            while True:
                at = datetime.now(UTC)
                batch = SampleBatchV1(
                    node=self.node,
                    at=at,
                    samples=[
                        gpu(0, node=self.node, mem_pct=self.mem_pct, tenant=self.tenant, xids=dict(self.xids))
                    ],
                )
                env = envelop(batch, source="test")
                topic = f"{self.iso.topic_prefix}{topics.TELEMETRY_SAMPLES}"
                await producer.send_and_wait(topic, value=encode(env), key=env.subject.encode())
                self.sent.append((at, self.mem_pct))
                await asyncio.sleep(period)
        finally:
            await producer.stop()

    def first_at(self, predicate: Callable[[float], bool]) -> datetime:
        return next(at for at, pct in self.sent if predicate(pct))

    @asynccontextmanager
    async def running(self, period: float = 0.25) -> AsyncIterator[Feeder]:
        self._task = asyncio.create_task(self._run(period))
        try:
            yield self
        finally:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def add_receiver(client: httpx.AsyncClient, receiver: Receiver, *, name: str = "default") -> None:
    """A webhook receiver, and a default route to it whose group_interval is 1 s (not 1 m)."""
    body = {"name": name, "kind": "webhook", "url": receiver.url, "secret": SECRET}
    response = await client.post("/v1/receivers", json=body, headers=ADMIN_HEADERS)
    assert response.status_code == 201, response.text
    tree = {"default": {"receiver": name, "group_wait": 0, "group_interval": 1}}
    response = await client.put("/v1/routes", json=tree, headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text


async def add_memory_rule(client: httpx.AsyncClient, *, name: str, node: str, for_: str) -> None:
    body = {
        "name": name,
        "metric": "fb_used_pct",
        "comparator": ">",
        "threshold": 90,
        "for": for_,
        "matchers": [{"name": "node", "op": "=", "value": node}],
        "severity": "critical",
        "summary": "GPU memory above 90%",
    }
    response = await client.post("/v1/rules", json=body, headers=ADMIN_HEADERS)
    assert response.status_code == 201, response.text


@asynccontextmanager
async def paging(
    iso: Isolation, *, node: str, rule: str, **settings: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Receiver]]:
    """The alerting app (with `settings`) running beside a webhook receiver, and a memory rule (`for` 1 s)
    on `node`, whose one GPU a feeder reports at 95%: the rule pages about a second in."""
    app = create_app(alerting_settings(iso, **settings))
    feeder = Feeder(iso, node=node, mem_pct=95)
    async with receiving() as receiver, running(app) as client, feeder.running():
        await add_receiver(client, receiver)
        await add_memory_rule(client, name=rule, node=node, for_="1s")
        yield client, receiver


def alerts_in(received: list[Received], status: str) -> list[dict[str, Any]]:
    return [a for r in received for a in r.json()["alerts"] if a["status"] == status]
