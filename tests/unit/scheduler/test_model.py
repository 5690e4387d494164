import pytest

from services.scheduler.domain.errors import InvalidTransition
from services.scheduler.domain.model import TERMINAL_STATES, WorkloadState, can_transition, transition
from tests.unit.scheduler.builders import workload

S = WorkloadState


@pytest.mark.parametrize(
    ("path"),
    [
        (S.QUEUED, S.PLACED, S.RUNNING, S.COMPLETED),
        (S.QUEUED, S.PLACED, S.RUNNING, S.PREEMPTED, S.QUEUED),
        (S.QUEUED, S.PLACED, S.RUNNING, S.MIGRATING, S.PLACED),
        (S.QUEUED, S.CANCELLED),
    ],
)
def test_lifecycle_paths_the_scheduler_uses_are_allowed(path: tuple[WorkloadState, ...]) -> None:
    w = workload("w")
    for target in path:
        w = transition(w, target=target)
    assert w.state is path[-1]


def test_terminal_states_lead_nowhere() -> None:
    assert all(not can_transition(source=t, target=s) for t in TERMINAL_STATES for s in S)


def test_scheduler_cannot_invent_a_start_for_queued_work() -> None:
    with pytest.raises(InvalidTransition, match="queued -> running"):
        transition(transition(workload("w"), target=S.QUEUED), target=S.RUNNING)
