"""The leadership lease: one holder at a time, a cut session is noticed, a deposed holder writes nothing."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest

from libs.common.db.leadership import LeadershipLost, lead
from libs.common.stopping import sleep_or_stop
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration


async def _connect(isolation: Isolation) -> asyncpg.Connection[Any]:
    return await asyncpg.connect(isolation.infra.database_url)


async def test_a_standby_takes_the_lease_once_the_holders_session_is_cut_and_the_holder_is_fenced(
    isolation: Isolation,
) -> None:
    key = f"test.leadership.{uuid.uuid4()}"
    holder_conn, standby_conn, writer = [await _connect(isolation) for _ in range(3)]
    stop = asyncio.Event()
    try:
        async with lead(holder_conn, key=key, stop=stop, wait=lambda: sleep_or_stop(stop, 0.05)) as lease:
            assert lease is not None
            await lease.confirm()
            await lease.fence(writer)  # the lock is this session's: the write may go ahead

            async def stand_by() -> int:
                wait = lambda: sleep_or_stop(stop, 0.05)  # noqa: E731
                async with lead(standby_conn, key=key, stop=stop, wait=wait) as successor:
                    assert successor is not None
                    return successor.pid

            standby = asyncio.create_task(stand_by())
            await asyncio.sleep(0.3)
            assert not standby.done(), "the standby waits while the holder's session lives"

            assert await writer.fetchval("SELECT pg_terminate_backend($1)", lease.pid)
            successor_pid = await asyncio.wait_for(standby, timeout=10)
            assert successor_pid == standby_conn.get_server_pid()

            with pytest.raises(LeadershipLost, match=r"gone|closed"):
                await lease.confirm()
            # The deposed holder's process is alive; what it would write is refused before it lands.
            async with writer.transaction():
                with pytest.raises(LeadershipLost, match="no longer this session's"):
                    await lease.fence(writer)
    finally:
        for conn in (holder_conn, standby_conn, writer):
            await conn.close()


async def test_leading_gives_the_lock_back_on_leaving_and_a_stop_ends_the_wait(isolation: Isolation) -> None:
    key = f"test.leadership.{uuid.uuid4()}"
    first, second = await _connect(isolation), await _connect(isolation)
    stop = asyncio.Event()
    try:
        async with lead(first, key=key, stop=stop, wait=lambda: sleep_or_stop(stop, 0.05)) as lease:
            assert lease is not None
        async with lead(second, key=key, stop=stop, wait=lambda: sleep_or_stop(stop, 0.05)) as taken:
            assert taken is not None, "given back on leaving, so the next one takes it at once"

            async def wait_while_held() -> object:
                wait = lambda: sleep_or_stop(stop, 0.05)  # noqa: E731
                async with lead(first, key=key, stop=stop, wait=wait) as never:
                    return never

            waiting = asyncio.create_task(wait_while_held())
            await asyncio.sleep(0.2)
            stop.set()
            assert await asyncio.wait_for(waiting, timeout=5) is None
    finally:
        await first.close()
        await second.close()


async def _lead_on_a_pool_connection_until_confirm_fails(pool: asyncpg.Pool[Any]) -> None:
    stop = asyncio.Event()
    key, wait = f"test.leadership.{uuid.uuid4()}", lambda: sleep_or_stop(stop, 0.05)
    # A check timeout no round trip meets: confirm finds the session unanswering and terminates it.
    async with (
        pool.acquire() as conn,
        lead(conn, key=key, stop=stop, wait=wait, check_timeout_s=1e-6) as lease,
    ):
        assert lease is not None
        await lease.confirm()


async def test_a_lease_on_a_pool_connection_that_confirm_terminated_leaves_with_leadership_lost(
    isolation: Isolation,
) -> None:
    pool = await asyncpg.create_pool(isolation.infra.database_url, min_size=1, max_size=1)
    try:
        # Before: the terminated connection went back to the pool, and leaving asked its proxy is_closed(),
        # which raised InterfaceError over the LeadershipLost.
        with pytest.raises(LeadershipLost, match="gone"):
            await _lead_on_a_pool_connection_until_confirm_fails(pool)
    finally:
        await pool.close()
