from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.inventory.domain.errors import ForbiddenTransitionError
from services.inventory.domain.health import (
    GpuHealth,
    HealthAction,
    NodeStatus,
    gpu_offers_capacity,
    node_offers_capacity,
    transition_gpu,
    transition_node,
)

AT = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
H = GpuHealth
A = HealthAction

ALLOWED = [
    (H.HEALTHY, A.DEGRADE, H.DEGRADED),
    (H.HEALTHY, A.DRAIN, H.DRAINING),
    (H.DEGRADED, A.DRAIN, H.DRAINING),
    (H.DRAINING, A.UNDRAIN, H.HEALTHY),
    (H.HEALTHY, A.FAIL, H.FAILED),
    (H.DEGRADED, A.FAIL, H.FAILED),
    (H.DRAINING, A.FAIL, H.FAILED),
    (H.FAILED, A.RECOVER, H.HEALTHY),
    (H.DEGRADED, A.RECOVER, H.HEALTHY),
]
FORBIDDEN = [
    (H.FAILED, A.DRAIN),
    (H.FAILED, A.UNDRAIN),
    (H.FAILED, A.DEGRADE),
    (H.DRAINING, A.DEGRADE),
    (H.DRAINING, A.RECOVER),
    (H.DEGRADED, A.UNDRAIN),
]


@pytest.mark.parametrize(("start", "action", "end"), ALLOWED)
def test_allowed_gpu_transitions_move_and_record_reason_and_time(start: H, action: A, end: H) -> None:
    state, record = transition_gpu(current=start, action=action, reason="xid 79", at=AT)
    assert state is end
    assert record is not None
    assert (record.from_state, record.to_state, record.reason, record.at) == (start, end, "xid 79", AT)


@pytest.mark.parametrize(("start", "action"), FORBIDDEN)
def test_forbidden_gpu_transitions_raise_naming_the_states(start: H, action: A) -> None:
    with pytest.raises(ForbiddenTransitionError, match=f"cannot {action.value} from {start.value}"):
        transition_gpu(current=start, action=action, reason="admin", at=AT)


@pytest.mark.parametrize(
    ("start", "action"), [(H.DRAINING, A.DRAIN), (H.FAILED, A.FAIL), (H.HEALTHY, A.RECOVER)]
)
def test_repeating_an_action_already_in_effect_records_nothing(start: H, action: A) -> None:
    assert transition_gpu(current=start, action=action, reason="again", at=AT) == (start, None)


def test_only_healthy_and_degraded_gpus_offer_capacity() -> None:
    assert {h for h in GpuHealth if gpu_offers_capacity(h)} == {H.HEALTHY, H.DEGRADED}


def test_a_node_drains_fails_and_recovers_with_records() -> None:
    status, drained = transition_node(
        current=NodeStatus.READY, action=A.DRAIN, reason="kernel upgrade", at=AT
    )
    assert status is NodeStatus.DRAINING
    assert drained is not None
    assert not node_offers_capacity(status)
    status, down = transition_node(current=status, action=A.FAIL, reason="unreachable", at=AT)
    assert status is NodeStatus.DOWN
    assert down is not None
    assert down.from_state is NodeStatus.DRAINING
    status, _ = transition_node(current=status, action=A.RECOVER, reason="back", at=AT)
    assert node_offers_capacity(status)


def test_nodes_have_no_degraded_state() -> None:
    with pytest.raises(ForbiddenTransitionError, match="degrade"):
        transition_node(current=NodeStatus.READY, action=A.DEGRADE, reason="hot", at=AT)
