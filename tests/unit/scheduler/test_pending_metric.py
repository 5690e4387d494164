"""The pending-workloads gauge: set from what a schedule pass left waiting, by tenant, at no extra query."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from libs.common.observability.metrics import TENANT_REGISTRY as REGISTRY
from services.scheduler.domain.decisions import QueuePosition, WaitReason
from services.scheduler.service.placer import PENDING, record_pending
from tests.unit.scheduler.builders import entry


@pytest.fixture(autouse=True)
def _fresh_gauge() -> Iterator[None]:
    PENDING.clear()
    yield
    PENDING.clear()


def _pending() -> dict[str, float]:
    return {
        s.labels["tenant"]: s.value
        for m in REGISTRY.collect()
        if m.name == "scheduler_pending_workloads"
        for s in m.samples
    }


def _waiting(*workload_ids: str) -> list[QueuePosition]:
    return [QueuePosition(w, i, 0.5, WaitReason.CAPACITY) for i, w in enumerate(workload_ids)]


def test_each_tenant_reads_how_many_of_its_workloads_the_pass_left_waiting() -> None:
    queue = [entry("a1"), entry("a2"), entry("a3"), entry("g1", tenant="globex")]

    record_pending(queue, _waiting("a1", "a3"))

    assert _pending() == {"acme": 2.0, "globex": 0.0}


def test_a_tenant_whose_work_was_all_placed_or_ended_reads_zero_rather_than_vanishing() -> None:
    record_pending([entry("a1"), entry("g1", tenant="globex")], _waiting("a1", "g1"))

    record_pending([entry("g2", tenant="globex")], _waiting("g2"))
    assert _pending() == {"acme": 0.0, "globex": 1.0}
    record_pending([], ())
    assert _pending() == {"acme": 0.0, "globex": 0.0}
