"""The whole suite behind PgBouncer in transaction mode (README.md, 'Behind PgBouncer').

Every service's pools reach Postgres through a real PgBouncer 1.18 (Debian's, started by the test with one
database entry per service schema, ``default_pool_size`` 3), and only what needs a session of its own goes
to Postgres directly (``DATABASE_DIRECT_URL``): migrations, each outbox relay's LISTEN and lock, the
placer's and the alerting evaluator's leases. The suite must then work as it does without the pooler
(a tenant's key replicated to every service, a workload placed and started) while the pooler, not the
services' own pool sizes, bounds the server connections each service holds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from libs.common.db.pool import PoolerMisconfigured, create_pool
from libs.common.runtime import SESSION_POOL_MAX
from libs.devkit.pgbouncer import PgBouncer, PgBouncerUnavailable, alias, resolve_binary
from tests.integration.flows.journey import job
from tests.integration.flows.suite import SERVICES, running_suite
from tests.integration.support import Isolation, eventually

pytestmark = pytest.mark.integration

POOL_SIZE = 3


def _bouncer_or_skip(iso: Isolation) -> PgBouncer:
    try:
        resolve_binary()
    except PgBouncerUnavailable as exc:
        pytest.skip(str(exc))
    schemas = [iso.schema(s) for s in SERVICES]
    return PgBouncer(
        iso.infra.database_url, schemas, pool_size=POOL_SIZE, queue_reads=(iso.schema("scheduler"),)
    )


async def test_the_suite_works_behind_pgbouncer_in_transaction_mode(
    isolation: Isolation, tmp_path: Path
) -> None:
    iso = isolation
    with _bouncer_or_skip(iso) as bouncer:
        env = {
            "DATABASE_POOLER": "transaction",
            "DATABASE_URL": bouncer.url,
            "DATABASE_DIRECT_URL": iso.infra.database_url,
            "DB_POOL_MAX": "10",  # more than the pooler's 3 per service: the pooler bounds them
        }
        async with running_suite(iso, tmp_path, env=env) as suite:
            acme = await suite.create_tenant("acme")  # platform events through every relay
            h100 = {"kind": "gpu", "model": "H100-80GB-SXM", "count": 1}
            body = job(resources=h100, urgency=0.5, project="pooled")
            made = await suite.scheduler.post("/v1/workloads", json=body, headers=acme)
            assert made.status_code == 201, made.text
            wid = made.json()["workload_id"]

            async def running() -> bool:
                got = await suite.scheduler.get(f"/v1/workloads/{wid}", headers=acme)
                return bool(got.json()["state"] == "running")

            await eventually(running, timeout=60, interval=0.2, what=f"{wid} running behind the pooler")
            for service in SERVICES:  # every readiness probe reads Postgres through the pooler
                ready = await suite.http[service].get("/readyz")
                assert ready.status_code == 200, (service, ready.text)

            pools = {row["database"]: row for row in bouncer.show("POOLS")}
            for service in SERVICES:
                pool = pools[alias(iso.schema(service))]
                assert pool["pool_mode"] == "transaction"
                servers = sum(int(pool[k]) for k in ("sv_active", "sv_idle", "sv_used", "sv_tested"))
                assert 1 <= servers <= POOL_SIZE, (service, pool)

            conn = await asyncpg.connect(iso.infra.database_url)
            try:
                held = await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1",
                    f"gpucloud-t{iso.token}_%",
                )
            finally:
                await conn.close()
            # Per service: the pooler's server connections and its direct sessions (relay, a lease);
            # the scheduler's placer session is one more.
            budget = len(SERVICES) * (POOL_SIZE + SESSION_POOL_MAX) + 1
            print(f"{held} connections held, budget {budget}; pools {pools}")
            assert 0 < held <= budget, (held, budget, suite.log_tails())


async def test_a_pooled_pool_whose_entry_sets_another_schema_refuses_to_start(isolation: Isolation) -> None:
    with _bouncer_or_skip(isolation) as bouncer:
        url = bouncer.url.replace("{schema}", isolation.schema("billing"))
        with pytest.raises(PoolerMisconfigured, match=r"connect_query sets search_path TO t\w+_inventory"):
            await create_pool(dsn=url, schema=isolation.schema("inventory"), pooled=True)
        pool = await create_pool(dsn=url, schema=isolation.schema("billing"), pooled=True, max_size=4)
        try:
            # No named statement survives a transaction there: the same statement over and over, on
            # whichever server connection each gets, is prepared anew each time and answers.
            answers = await asyncio.gather(*(pool.fetchval("SELECT $1::int + 1", i) for i in range(50)))
            assert answers == [i + 1 for i in range(50)]
        finally:
            await pool.close()
