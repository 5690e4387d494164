"""Composition root of the gateway: settings, Redis, the shared HTTP client, sessions, live streams."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

from libs.common.http.errors import install_error_handlers
from libs.common.redis import Keyspace, create_redis
from services.gateway.adapters.session_store import RedisSessionStore
from services.gateway.adapters.upstream import Upstreams, create_client
from services.gateway.api import console, live, proxy, session
from services.gateway.api.operations import probes
from services.gateway.service.context import GatewayContext, WebConfig
from services.gateway.service.live import LiveConfig, LiveHub
from services.gateway.service.sessions import Sessions
from services.gateway.settings import GatewaySettings

__all__ = ["create_app"]


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    """Build the gateway app; Redis and the services are first reached when requests come."""
    settings = settings or GatewaySettings()
    redis = create_redis(settings.redis_url)
    client = create_client(timeout_s=settings.upstream_timeout_s)
    upstreams = Upstreams(client=client, urls=settings.upstreams)
    store = RedisSessionStore(
        redis=redis, keys=Keyspace(settings.redis_prefix).child("gateway").child("session")
    )
    context = GatewayContext(
        web=WebConfig(
            secure_cookies=settings.secure_cookies,
            public_origin=settings.public_origin,
            console_dir=settings.console_dir,
            max_request_bytes=settings.max_request_bytes,
        ),
        sessions=Sessions(store=store, whoami=upstreams.whoami, ttl_s=settings.session_ttl_s),
        upstreams=upstreams,
        live=LiveHub(
            upstreams=upstreams,
            config=LiveConfig(
                heartbeat_s=settings.heartbeat_s,
                poll_s=settings.live_poll_s,
                resume_buffer=settings.resume_buffer,
                expiry_s=settings.stream_expiry_s,
            ),
        ),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await client.aclose()
            await redis.aclose()

    async def redis_answers() -> None:
        await redis.ping()

    app = FastAPI(
        title="gpucloud gateway",
        description="The web console on one origin: sessions, the six APIs proxied, live data over SSE.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.gateway = context
    install_error_handlers(app)
    app.include_router(probes(service=settings.service_name, checks={"redis": redis_answers}))
    for router in (session.router, live.router, proxy.router, console.router):  # the console's catch-all last
        app.include_router(router)
    FastAPIInstrumentor.instrument_app(
        app, excluded_urls="healthz,readyz,metrics", exclude_spans=["receive", "send"]
    )
    return app
