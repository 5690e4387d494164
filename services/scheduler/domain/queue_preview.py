"""Priority classes a person names, and where a request of one would land in the queue.

The scheduler's priority is ``min(0.6 * urgency + 0.4 * (1 - fair_share), 1.0)`` and the reserved pool calls
a priority of 0.5 or more high. The classes are urgencies chosen against that line: ``high`` (urgency 1.0)
is high whatever the tenant's fair share, ``low`` (urgency 0, preemptible, billed as spot) is low whatever
it is, and ``normal`` is the submission default (0.5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from services.scheduler.domain.decisions import QueueEntry, order_queue
from services.scheduler.domain.model import Workload

__all__ = [
    "PREVIEW_ID",
    "PRIORITY_CLASSES",
    "PriorityClass",
    "PriorityClassName",
    "QueuePreview",
    "preview_position",
]

PriorityClassName = Literal["high", "normal", "low"]
#: The id of the request previewed: no stored workload has it ("wl-..."), and it sorts after every real id,
#: so of requests equal in priority and age the real one stays ahead.
PREVIEW_ID = "~preview"


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """What a class sets on a request: its urgency and whether it may be preempted (spot)."""

    name: PriorityClassName
    urgency: float
    preemptible: bool


PRIORITY_CLASSES: Mapping[PriorityClassName, PriorityClass] = {
    "high": PriorityClass("high", 1.0, False),
    "normal": PriorityClass("normal", 0.5, False),
    "low": PriorityClass("low", 0.0, True),
}


@dataclass(frozen=True, slots=True)
class QueuePreview:
    """The 1-based place a new request would take, how many wait ahead of it, and how many of those ask
    for the same GPU model (work on another model never holds it back)."""

    position: int
    ahead: int
    same_model_ahead: int


def _model_of(workload: Workload) -> str | None:
    return getattr(workload.resources, "model", None)


def preview_position(queue: Sequence[QueueEntry], *, candidate: QueueEntry) -> QueuePreview:
    """Where ``candidate`` falls among ``queue`` in the placer's own order (``order_queue``)."""
    ordered = order_queue([*queue, candidate])
    index = next(i for i, e in enumerate(ordered) if e is candidate)
    model = _model_of(candidate.workload)
    same = sum(1 for e in ordered[:index] if model is None or _model_of(e.workload) in (None, model))
    return QueuePreview(position=index + 1, ahead=index, same_model_ahead=same)
