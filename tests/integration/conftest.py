"""Integration fixtures: the real broker, Postgres and Redis, and per-test isolation.

With a Docker engine, testcontainers starts Kafka, PostgreSQL and Redis containers. Without one
(this project's CI machines), the tests use the local PostgreSQL and Redis and start the embedded
Kafka-compatible broker. Environment variables KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL and REDIS_URL
override either choice.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

from libs.common.redis import Keyspace, create_redis
from libs.devkit.broker import EmbeddedBroker
from tests.integration.support import Infra, Isolation


def _docker_available() -> bool:
    if os.environ.get("GPUCLOUD_NO_DOCKER"):
        return False
    try:
        import docker

        docker.from_env(timeout=2).ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def infra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    """Where the broker, Postgres and Redis are for this session; starts what is needed."""
    stack: list[object] = []
    docker = _docker_available()
    kafka = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    database_url = os.environ.get("DATABASE_URL")
    redis_url = os.environ.get("REDIS_URL")
    if docker:  # pragma: no cover - exercised where a Docker engine answers
        from testcontainers.kafka import KafkaContainer
        from testcontainers.postgres import PostgresContainer
        from testcontainers.redis import RedisContainer

        if not kafka:
            kc = KafkaContainer("confluentinc/cp-kafka:7.6.1").with_kraft().start()
            stack.append(kc)
            kafka = kc.get_bootstrap_server()
        if not database_url:
            pc = PostgresContainer("postgres:16-alpine", driver=None).start()
            stack.append(pc)
            database_url = pc.get_connection_url()
        if not redis_url:
            rc = RedisContainer("redis:7-alpine").start()
            stack.append(rc)
            redis_url = f"redis://{rc.get_container_host_ip()}:{rc.get_exposed_port(6379)}/0"
    broker = None
    if not kafka:
        log = tmp_path_factory.mktemp("broker") / "tansu.log"
        broker = EmbeddedBroker(log_path=log).start()
        kafka = broker.bootstrap
    try:
        yield Infra(
            kafka=kafka,
            database_url=database_url or "postgresql://postgres@127.0.0.1:5432/postgres",
            redis_url=redis_url or "redis://127.0.0.1:6379/0",
        )
    finally:
        if broker is not None:
            broker.stop()
        for container in reversed(stack):  # pragma: no cover
            container.stop()  # type: ignore[attr-defined]


@pytest.fixture
async def isolation(infra: Infra) -> AsyncIterator[Isolation]:
    """A fresh topic prefix, schema prefix and Redis prefix; cleaned up after the test."""
    iso = Isolation(infra=infra)
    try:
        yield iso
    finally:
        await iso.drop_schemas()
        client = create_redis(infra.redis_url)
        try:
            await Keyspace(iso.redis_prefix).clear(client)
        finally:
            await client.aclose()
