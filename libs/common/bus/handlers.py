"""The one handler shape, and the one way to register handlers for a consumer.

A handler is ``async def on_<event>(event: SomethingHappenedV1, ctx: HandlerContext[Deps]) -> None``: the
decoded payload, and a context holding the envelope, the open unit of work (the runner commits it, with the
inbox row) and the consumer's dependencies. ``Handlers(deps).on(SomethingHappenedV1, on_something)`` adds
one; mypy checks that the handler takes the event type it is registered for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic

from typing_extensions import TypeVar

from libs.common.db.uow import UnitOfWork
from libs.common.events import Envelope, Event

__all__ = ["Handler", "HandlerContext", "Handlers"]

D = TypeVar("D")
#: A context without deps (``HandlerContext`` bare) has ``deps`` None.
D_co = TypeVar("D_co", covariant=True, default=None)
E = TypeVar("E", bound=Event)


@dataclass(frozen=True, slots=True)
class HandlerContext(Generic[D_co]):
    """What a handler gets besides its payload: the envelope, the open unit of work, the consumer's deps."""

    envelope: Envelope
    uow: UnitOfWork
    deps: D_co


#: A registered handler as the runner calls it.
Handler = Callable[[Any, HandlerContext[Any]], Awaitable[None]]


class Handlers(Generic[D]):
    """One consumer's handlers by event type, all sharing the dependencies ``deps``."""

    def __init__(self, deps: D) -> None:
        self.deps = deps
        self._table: dict[type[Event], Handler] = {}

    def on(
        self, event_type: type[E], handler: Callable[[E, HandlerContext[D]], Awaitable[None]]
    ) -> Handlers[D]:
        """Register ``handler`` for ``event_type`` (once per type); returns self, to chain."""
        if event_type in self._table:
            raise ValueError(f"{event_type.__name__} has a handler already")
        self._table[event_type] = handler
        return self

    @property
    def table(self) -> Mapping[type[Event], Handler]:
        """Event type -> handler, as registered."""
        return dict(self._table)
