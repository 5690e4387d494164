from __future__ import annotations

from datetime import timedelta

import pytest

from services.recovery.domain.workload_moves import Migration, MigrationPhase, apply_progress
from tests.unit.recovery.conftest import T0

P = MigrationPhase


def at(phase: MigrationPhase, percent: int) -> Migration:
    return Migration(workload_id="wl-1", phase=phase, percent=percent, updated_at=T0)


def test_progress_moves_forward_through_the_phases_with_its_time() -> None:
    moved = apply_progress(at(P.CHECKPOINT, 20), phase=P.TRANSFER, percent=45, at=T0 + timedelta(seconds=3))
    assert moved == Migration(
        workload_id="wl-1", phase=P.TRANSFER, percent=45, updated_at=T0 + timedelta(seconds=3)
    )


def test_progress_within_a_phase_is_accepted_when_the_percent_rises() -> None:
    moved = apply_progress(at(P.TRANSFER, 40), phase=P.TRANSFER, percent=55, at=T0)
    assert moved is not None
    assert moved.percent == 55


def test_reaching_running_completes_the_migration_at_100_percent() -> None:
    moved = apply_progress(at(P.RESTORE, 80), phase=P.RUNNING, percent=90, at=T0)
    assert moved is not None
    assert moved.done
    assert moved.percent == 100


def test_a_forward_skip_of_a_phase_is_accepted() -> None:
    moved = apply_progress(at(P.CHECKPOINT, 10), phase=P.RESTORE, percent=70, at=T0)
    assert moved is not None
    assert moved.phase is P.RESTORE


@pytest.mark.parametrize(
    ("current", "phase", "percent"),
    [
        (at(P.TRANSFER, 50), P.CHECKPOINT, 60),  # phase goes back
        (at(P.TRANSFER, 50), P.TRANSFER, 40),  # percent falls
        (at(P.TRANSFER, 50), P.RESTORE, 45),  # phase forward but percent falls
        (at(P.TRANSFER, 50), P.TRANSFER, 50),  # exact duplicate
        (at(P.RUNNING, 100), P.RUNNING, 100),  # already done
        (at(P.TRANSFER, 50), P.TRANSFER, 101),  # out of range
        (at(P.TRANSFER, 50), P.PENDING, 60),  # pending is not a report
    ],
)
def test_stale_duplicate_or_invalid_progress_is_ignored(
    current: Migration, phase: MigrationPhase, percent: int
) -> None:
    assert apply_progress(current, phase=phase, percent=percent, at=T0) is None


def test_a_new_migration_is_pending_at_zero_percent() -> None:
    migration = Migration(workload_id="wl-1")
    assert (migration.phase, migration.percent, migration.done) == (P.PENDING, 0, False)
