"""The one handler shape, and the one way to register handlers for a consumer.

A handler is ``async def on_<event>(event: SomethingHappenedV1, ctx: HandlerContext[Deps, Uow]) -> None``:
the decoded payload, and a context holding the envelope, the open unit of work (the runner commits it, with
the inbox row; it carries the service's stores, ``ctx.uow.workloads``) and the consumer's dependencies.
``Handlers(deps, uow=ServiceUnitOfWork).on(SomethingHappenedV1, on_something)`` adds one; mypy checks that
the handler takes the event type it is registered for, the deps given and the unit of work the runner opens.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, cast

import asyncpg
from typing_extensions import TypeVar

from libs.common.db.uow import PostgresUnitOfWork, UnitOfWork
from libs.common.events import Envelope, Event

__all__ = ["Handler", "HandlerContext", "Handlers", "UnitOfWorkType"]

D = TypeVar("D")
#: A context without deps (``HandlerContext`` bare) has ``deps`` None.
D_co = TypeVar("D_co", covariant=True, default=None)
#: The unit of work a context holds: the plain one unless the service's, with its stores, is named.
U = TypeVar("U", bound=UnitOfWork, default=UnitOfWork)
U_co = TypeVar("U_co", bound=UnitOfWork, covariant=True, default=UnitOfWork)
E = TypeVar("E", bound=Event)


class UnitOfWorkType(Protocol[U_co]):
    """How the runner opens a service's unit of work for one delivery (the class, called with these)."""

    def __call__(self, *, pool: asyncpg.Pool[Any], source: str) -> U_co: ...


@dataclass(frozen=True, slots=True)
class HandlerContext(Generic[D_co, U_co]):
    """What a handler gets besides its payload: the envelope, the open unit of work, the consumer's deps."""

    envelope: Envelope
    uow: U_co
    deps: D_co


#: A registered handler as the runner calls it.
Handler = Callable[[Any, HandlerContext[Any, Any]], Awaitable[None]]


class Handlers(Generic[D, U]):
    """One consumer's handlers by event type, all sharing the dependencies ``deps`` and the kind of unit of
    work ``uow`` the runner opens for each delivery (the plain ``PostgresUnitOfWork`` unless named)."""

    def __init__(self, deps: D, *, uow: UnitOfWorkType[U] | None = None) -> None:
        self.deps = deps
        self._uow: UnitOfWorkType[U] = uow or cast(UnitOfWorkType[U], PostgresUnitOfWork)
        self._table: dict[type[Event], Handler] = {}

    def unit_of_work(self, *, pool: asyncpg.Pool[Any], source: str) -> U:
        """A new unit of work of the kind these handlers take, on ``pool``."""
        return self._uow(pool=pool, source=source)

    def on(
        self, event_type: type[E], handler: Callable[[E, HandlerContext[D, U]], Awaitable[None]]
    ) -> Handlers[D, U]:
        """Register ``handler`` for ``event_type`` (once per type); returns self, to chain."""
        if event_type in self._table:
            raise ValueError(f"{event_type.__name__} has a handler already")
        self._table[event_type] = handler
        return self

    @property
    def table(self) -> Mapping[type[Event], Handler]:
        """Event type -> handler, as registered."""
        return dict(self._table)
