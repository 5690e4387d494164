"""A service started with the standard OpenTelemetry variables sends its spans to an OTLP collector."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from libs.devkit.broker import free_port
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually

SERVICE = "inventory"  # the cheapest to start; GET /v1/catalog reads no table
PATH = "/v1/catalog"
#: What an orchestrator waits between SIGTERM and SIGKILL by default (Kubernetes: 30 s).
GRACE_S = 30.0


@dataclass
class Collector:
    """A stand-in OTLP/HTTP collector: keeps each span POSTed to /v1/traces with its service.name."""

    port: int = field(default_factory=free_port)
    spans: list[tuple[str, Span]] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def traces(self, request: web.Request) -> web.Response:
        body = ExportTraceServiceRequest.FromString(await request.read())
        for resource_spans in body.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                self.spans.extend((attributes.get("service.name", ""), s) for s in scope_spans.spans)
        reply = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=reply, content_type="application/x-protobuf")

    def server_spans(self, trace_id: str) -> list[tuple[str, Span]]:
        """The server spans received for one trace."""
        return [
            (service, span)
            for service, span in self.spans
            if span.trace_id.hex() == trace_id and span.kind == Span.SPAN_KIND_SERVER
        ]


@asynccontextmanager
async def _collector() -> AsyncIterator[Collector]:
    collector = Collector()
    app = web.Application()
    app.router.add_post("/v1/traces", collector.traces)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", collector.port).start()
    try:
        yield collector
    finally:
        await runner.cleanup()


@asynccontextmanager
async def _service(
    iso: Isolation, *, collector: Collector, schedule_delay_ms: int, log: Path
) -> AsyncIterator[tuple[subprocess.Popen[bytes], httpx.AsyncClient]]:
    """The service as its own process, exporting to ``collector``, once it is ready."""
    port = free_port()
    env = {k: v for k, v in iso.environ(SERVICE, port=port).items() if not k.startswith("OTEL_")}
    env |= {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": str(schedule_delay_ms),
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", f"services.{SERVICE}"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:

            async def ready() -> bool:
                assert process.poll() is None, f"{SERVICE} exited while starting; its log: {log}"
                try:
                    return (await client.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(ready, timeout=60, what=f"{SERVICE} ready")
            yield process, client
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def _traced_request(client: httpx.AsyncClient) -> tuple[str, str]:
    """GET the path inside a trace the caller started; returns that trace id and the caller's span id."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    headers = {**ADMIN_HEADERS, "traceparent": f"00-{trace_id}-{span_id}-01"}
    response = await client.get(PATH, headers=headers)
    assert response.status_code == 200, response.text
    return trace_id, span_id


async def test_a_request_span_reaches_the_collector_in_the_callers_trace_named_after_the_service(
    isolation: Isolation, tmp_path: Path
) -> None:
    async with (
        _collector() as collector,
        _service(isolation, collector=collector, schedule_delay_ms=200, log=tmp_path / "svc.log") as (_, c),
    ):
        trace_id, parent_id = await _traced_request(c)

        async def arrived() -> list[tuple[str, Span]]:
            return collector.server_spans(trace_id)

        [(service, span)] = await eventually(arrived, timeout=15, what="the request's server span")
    assert service == SERVICE
    assert span.parent_span_id.hex() == parent_id
    assert span.name == f"GET {PATH}"


async def test_spans_still_batched_at_sigterm_reach_the_collector_before_the_process_exits(
    isolation: Isolation, tmp_path: Path
) -> None:
    log = tmp_path / "svc.log"
    async with (
        _collector() as collector,
        # An hour between scheduled exports: only the flush on shutdown can deliver the span.
        _service(isolation, collector=collector, schedule_delay_ms=3_600_000, log=log) as (process, c),
    ):
        trace_id, _ = await _traced_request(c)
        assert collector.server_spans(trace_id) == []  # still in the batch
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(process.wait, GRACE_S)
        assert process.poll() is not None, f"still running {GRACE_S}s after SIGTERM"
        spans = collector.server_spans(trace_id)
    assert [service for service, _ in spans] == [SERVICE], log.read_text()[-3000:]
