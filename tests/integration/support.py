"""Helpers for integration tests: isolation per test, running apps, polling, reading topics."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
from aiokafka import AIOKafkaConsumer
from fastapi import FastAPI

from libs.common.events import EVENT_TYPES, Envelope, Event, decode
from libs.common.settings import DEV_ADMIN_KEY

T = TypeVar("T")
ADMIN_HEADERS = {"X-API-Key": DEV_ADMIN_KEY}


@dataclass
class Infra:
    """Where the real broker, Postgres and Redis are for this test session."""

    kafka: str
    database_url: str
    redis_url: str


@dataclass
class Isolation:
    """Names that keep one test's topics, schemas and Redis keys apart from every other test's."""

    infra: Infra
    token: str = field(default_factory=lambda: secrets.token_hex(4))

    @property
    def topic_prefix(self) -> str:
        return f"t{self.token}."

    @property
    def redis_prefix(self) -> str:
        return f"test:{self.token}:"

    def schema(self, service: str) -> str:
        return f"t{self.token}_{service}"

    @property
    def object_dir(self) -> Path:
        """This test's object store (logs, outputs, checkpoints), removed with its schemas."""
        return Path(tempfile.gettempdir()) / "gpucloud-test-objects" / self.token

    @property
    def object_store_url(self) -> str:
        return self.object_dir.as_uri()

    def settings(self, cls: type[T], service: str, **overrides: Any) -> T:
        """Settings of ``cls`` pointed at this test's slice of the real infrastructure."""
        values: dict[str, Any] = {
            "kafka_bootstrap_servers": self.infra.kafka,
            "kafka_topic_prefix": self.topic_prefix,
            "kafka_partitions": 3,
            "database_url": self.infra.database_url,
            "db_schema": self.schema(service),
            "redis_url": self.infra.redis_url,
            "redis_prefix": self.redis_prefix,
            "log_json": False,
            "outbox_poll_interval_s": 0.2,
            "object_store_url": self.object_store_url,
        }
        values.update(overrides)
        return cls(**values)

    def environ(
        self, service: str, *, port: int, bootstrap: str | None = None, **extra: str
    ) -> dict[str, str]:
        """The environment of a service process (``python -m services.<service>``) on this test's slice:
        what ``settings`` gives an in-process app, as variables, plus the HTTP port and ``extra``."""
        return {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap or self.infra.kafka,
            "KAFKA_TOPIC_PREFIX": self.topic_prefix,
            "DATABASE_URL": self.infra.database_url,
            "DB_SCHEMA": self.schema(service),
            "REDIS_URL": self.infra.redis_url,
            "REDIS_PREFIX": self.redis_prefix,
            f"{service.upper()}_HTTP_PORT": str(port),
            "LOG_JSON": "false",
            "OBJECT_STORE_URL": self.object_store_url,
            **extra,
        }

    async def drop_schemas(self) -> None:
        """Drop this test's schemas (and its object store directory)."""
        shutil.rmtree(self.object_dir, ignore_errors=True)
        conn = await asyncpg.connect(self.infra.database_url)
        try:
            rows = await conn.fetch(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1", f"t{self.token}\\_%"
            )
            for row in rows:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{row["nspname"]}" CASCADE')
        finally:
            await conn.close()


def process_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 15.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll ``probe`` until it returns a truthy value; fail the test after ``timeout`` seconds.

    A truthy value is never None, so a probe answering ``X | None`` gives an ``X``.
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


@asynccontextmanager
async def running(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Start an app's lifespan (runtime, consumers, relay) and give an HTTP client to it."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            yield client


class TopicReader:
    """Reads a topic (and those in ``also``) from the beginning (own consumer group) to assert on what was
    published. Each reader's start waits for its group to form (seconds): read several topics with one."""

    def __init__(
        self, *, bootstrap: str, topic: str = "", also: Sequence[str] = (), pattern: str | None = None
    ) -> None:
        """``pattern``: read every topic it matches instead (a rolling topic's generations)."""
        self._consumer = AIOKafkaConsumer(
            *([] if pattern else [topic, *also]),
            bootstrap_servers=bootstrap,
            group_id=f"reader-{secrets.token_hex(4)}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            metadata_max_age_ms=2000,
        )
        if pattern:
            self._consumer.subscribe(pattern=pattern)
        self.events: list[tuple[Envelope, Event]] = []
        self.raw: list[Any] = []

    async def __aenter__(self) -> TopicReader:
        await self._consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()

    async def poll(self) -> list[tuple[Envelope, Event]]:
        """Fetch whatever arrived since the last poll; returns everything read so far."""
        batches = await self._consumer.getmany(timeout_ms=100)
        for records in batches.values():
            for record in records:
                self.raw.append(record)
                try:
                    self.events.append(decode(record.value, EVENT_TYPES))
                except ValueError:
                    continue
        return self.events

    async def wait_for(
        self,
        predicate: Callable[[list[tuple[Envelope, Event]]], bool],
        *,
        timeout: float = 15.0,
        what: str = "events",
    ) -> list[tuple[Envelope, Event]]:
        """Poll until ``predicate(events)`` holds."""

        async def probe() -> list[tuple[Envelope, Event]] | None:
            events = await self.poll()
            return events if predicate(events) else None

        result = await eventually(probe, timeout=timeout, what=what)
        assert result is not None
        return result


async def provision_tenant(iso: Isolation, tenant_id: str, *, name: str | None = None) -> str:
    """Create a tenant and a key by publishing the platform events (as the scheduler's admin API does).

    Returns the secret API key. Services learn of it through their platform consumer, so wait for
    the key to work (``eventually``) before relying on it.
    """
    from libs.common.auth.keys import issue_key
    from libs.common.bus import create_producer
    from libs.common.events import encode, envelop, topics
    from libs.common.events.platform import ApiKeyIssuedV1, TenantCreatedV1

    issued = issue_key()
    payloads = [
        TenantCreatedV1(tenant_id=tenant_id, name=name or tenant_id),
        ApiKeyIssuedV1(key_id=issued.key_id, tenant_id=tenant_id, role="tenant", key_hash=issued.key_hash),
    ]
    producer = create_producer(bootstrap=iso.infra.kafka, client_id="test-provision")
    await producer.start()
    try:
        for payload in payloads:
            env = envelop(payload, source="test", tenant=tenant_id)
            await producer.send_and_wait(
                f"{iso.topic_prefix}{topics.PLATFORM}", value=encode(env), key=env.subject.encode()
            )
    finally:
        await producer.stop()
    return issued.secret


async def key_works(client: httpx.AsyncClient, key: str, path: str) -> bool:
    """True once ``key`` authenticates against ``path`` on a running service."""
    response = await client.get(path, headers={"X-API-Key": key})
    return response.status_code != 401
