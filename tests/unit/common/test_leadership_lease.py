"""A lease whose lock session answers with a broken protocol state counts as lost, never as held."""

from __future__ import annotations

from typing import Any, cast

import asyncpg
import pytest

from libs.common.db.leadership import LeadershipLost, Lease


class _CutSession:
    """A lock session whose server goodbye arrived while a statement was in flight."""

    def __init__(self, error: BaseException) -> None:
        self._error = error
        self.terminated = False

    def is_closed(self) -> bool:
        return self.terminated

    async def execute(self, query: str, *args: object, timeout: float | None = None) -> str:
        raise self._error

    def terminate(self) -> None:
        self.terminated = True


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.InternalClientError("cannot switch to state 15; another operation in progress"),
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        TimeoutError(),
    ],
    ids=["protocol-state", "closed", "timeout"],
)
async def test_a_broken_lock_session_is_lost_and_closed(error: BaseException) -> None:
    session = _CutSession(error)
    lease = Lease(conn=cast("asyncpg.Connection[Any]", session), key="k", pid=1)
    with pytest.raises(LeadershipLost, match="gone"):
        await lease.confirm()
    assert session.terminated
    assert not lease.open
    with pytest.raises(LeadershipLost, match="closed"):
        await lease.confirm()
