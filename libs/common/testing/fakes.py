"""A unit of work that records emitted events in memory and obeys commit/rollback like the real one."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from libs.common.events import Event

__all__ = ["FakeUnitOfWork"]


class FakeUnitOfWork:
    """Collects emitted events; they become ``committed`` only if ``commit`` ran inside the block."""

    def __init__(self, conn: Any = None) -> None:
        self._conn = conn
        self._pending: list[tuple[Event, str | None]] = []
        self.committed: list[tuple[Event, str | None]] = []
        self._open = False

    @property
    def conn(self) -> Any:
        if self._conn is None:
            raise RuntimeError("FakeUnitOfWork has no connection; handlers with SQL need the real one")
        return self._conn

    async def __aenter__(self) -> FakeUnitOfWork:
        self._open = True
        self._pending = []
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._pending = []
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

    @property
    def events(self) -> list[Event]:
        """Payloads committed so far."""
        return [payload for payload, _ in self.committed]
