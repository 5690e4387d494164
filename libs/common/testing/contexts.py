"""A handler's context for unit tests: the event's envelope, a unit of work and the consumer's deps."""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from libs.common.bus.handlers import HandlerContext
from libs.common.db.uow import UnitOfWork
from libs.common.events import Event, envelop

__all__ = ["handler_context"]

D = TypeVar("D")
U = TypeVar("U", bound=UnitOfWork)


def handler_context(
    event: Event, *, uow: U, deps: D, time: datetime | None = None, source: str = "test"
) -> HandlerContext[D, U]:
    """The context the consumer runner would pass for ``event``, delivered at ``time`` (default: now)."""
    envelope = envelop(event, source=f"/gpucloud/{source}", time=time)
    return HandlerContext(envelope=envelope, uow=uow, deps=deps)
