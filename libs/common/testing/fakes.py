"""A unit of work that records emitted events in memory and obeys commit/rollback like the real one."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from libs.common.events import Event

__all__ = ["FakeUnitOfWork"]


class FakeUnitOfWork:
    """Collects emitted events; they become ``committed`` only if ``commit`` ran inside the block.

    A service's fake unit of work carries its fake stores and names them in ``tracked``: what a block
    changed in them is undone when it ends without ``commit``, as the real transaction's rollback would.
    """

    def __init__(self, conn: Any = None, *, tracked: Sequence[object] = ()) -> None:
        self._conn = conn
        self._pending: list[tuple[Event, str | None]] = []
        self.committed: list[tuple[Event, str | None]] = []
        self._open = False
        self._tracked = tuple(tracked)
        self._snapshots: list[dict[str, Any]] = []
        self._after_commit: list[Callable[[], None]] = []

    @property
    def conn(self) -> Any:
        if self._conn is None:
            raise RuntimeError("FakeUnitOfWork has no connection; handlers with SQL need the real one")
        return self._conn

    async def __aenter__(self) -> Self:
        self._open = True
        self._pending = []
        self._snapshots = [copy.deepcopy(vars(store)) for store in self._tracked]
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        for store, before in zip(self._tracked, self._snapshots, strict=False):
            vars(store).clear()
            vars(store).update(before)
        self._snapshots = []
        self._pending = []
        self._after_commit = []  # not committed by now: rolled back
        self._open = False

    async def emit(self, payload: Event, *, tenant: str | None = None, time: datetime | None = None) -> str:
        if not self._open:
            raise RuntimeError("unit of work used outside `async with`")
        payload.subject()  # the real one needs an aggregate id; so does the fake
        self._pending.append((payload, tenant))
        return f"fake-{len(self.committed) + len(self._pending)}"

    async def emit_many(self, payloads: Sequence[Event], *, tenant: str | None = None) -> list[str]:
        return [await self.emit(p, tenant=tenant) for p in payloads]

    async def commit(self) -> None:
        if not self._open:
            raise RuntimeError("nothing to commit")
        self.committed.extend(self._pending)
        self._pending = []
        self._snapshots = []  # committed: nothing left to undo
        actions, self._after_commit = self._after_commit, []
        for action in actions:
            action()

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the block has committed, as the real one does; never if it rolls back."""
        self._after_commit.append(action)

    @property
    def events(self) -> list[Event]:
        """Payloads committed so far."""
        return [payload for payload, _ in self.committed]
