"""Progress of one workload's migration through checkpoint, transfer, restore and running."""

from __future__ import annotations

from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

__all__ = ["Migration", "MigrationPhase", "apply_progress"]


class MigrationPhase(StrEnum):
    """Phases of a migration, in the only order they may happen."""

    PENDING = "pending"
    CHECKPOINT = "checkpoint"
    TRANSFER = "transfer"
    RESTORE = "restore"
    RUNNING = "running"


_RANK = {phase: rank for rank, phase in enumerate(MigrationPhase)}


class Migration(BaseModel):
    """Where one workload's migration stands; percent is overall progress for the progress bar."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload_id: str
    phase: MigrationPhase = MigrationPhase.PENDING
    percent: int = Field(default=0, ge=0, le=100)
    updated_at: AwareDatetime | None = Field(default=None, description="When recovery heard of the last step")
    ran_at: AwareDatetime | None = Field(
        default=None,
        description="When the host ran the workload on its new placement: the running step's own instant",
    )
    restored: bool | None = Field(
        default=None,
        description="Once running: whether it started from its checkpoint (False: restarted from the start)",
    )
    note: str = Field(default="", description="What the host said of the move, e.g. why it did not restore")

    @property
    def done(self) -> bool:
        """Whether the workload runs again on its new GPU."""
        return self.phase is MigrationPhase.RUNNING


def apply_progress(
    migration: Migration,
    *,
    phase: MigrationPhase,
    percent: int,
    at: AwareDatetime,
    host_at: AwareDatetime | None = None,
    restored: bool | None = None,
    note: str = "",
) -> Migration | None:
    """The migration after a progress report, or None when the report is stale, duplicate or invalid.

    Reports arrive at least once and may be late, so only strictly forward ones count: the phase must not
    go back, the percent must not fall, and something must change. Skipping a phase forward is accepted
    because the report for it may have been superseded. Reaching running means 100%, and ``ran_at``
    becomes the host's instant of the report (``host_at``; ``at``, when recovery heard of it, without one).
    """
    if migration.done or not 0 <= percent <= 100 or phase is MigrationPhase.PENDING:
        return None
    if phase is MigrationPhase.RUNNING:
        percent = 100
    if _RANK[phase] < _RANK[migration.phase] or percent < migration.percent:
        return None
    if phase is migration.phase and percent == migration.percent and (not note or note == migration.note):
        return None
    update: dict[str, object] = {"phase": phase, "percent": percent, "updated_at": at}
    if note:
        update["note"] = note  # the latest thing the host said of the move (a running step's says how)
    if phase is MigrationPhase.RUNNING:
        update["ran_at"] = host_at or at
        update["restored"] = restored
    return migration.model_copy(update=update)
