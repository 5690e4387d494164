"""Committing the placer's decisions: each with its quota reservation and events, atomically.

``commit_placement`` places one workload in one unit of work (a migration's leaving too);
``commit_placements`` commits a pass's decisions in chunks; preemptions are scheduled and ended here.
"""

from services.scheduler.service.commit._chunks import CHUNK, commit_placements
from services.scheduler.service.commit._one import (
    allocation_item,
    commit_placement,
    commit_preemption,
    expire_preemption,
)

__all__ = [
    "CHUNK",
    "allocation_item",
    "commit_placement",
    "commit_placements",
    "commit_preemption",
    "expire_preemption",
]
