"""The queue preview: where a request of a priority class would land, by the placer's own order."""

from __future__ import annotations

from dataclasses import replace

from services.scheduler.domain.decisions import QueueEntry, order_queue
from services.scheduler.domain.model import GpuRequest, UnitsRequest
from services.scheduler.domain.priority import priority
from services.scheduler.domain.queue_preview import PREVIEW_ID, PRIORITY_CLASSES, preview_position
from services.scheduler.domain.reserved import ReservedPoolConfig, is_high
from tests.unit.scheduler.builders import entry, workload

A100 = GpuRequest(model="A100-80GB", count=1)
H100 = GpuRequest(model="H100-80GB-SXM", count=1)


def candidate(prio: float, resources: GpuRequest | UnitsRequest = A100) -> QueueEntry:
    return QueueEntry(workload=workload(PREVIEW_ID, resources), priority=prio)


def test_high_is_high_and_low_is_low_for_the_reserved_pool_whatever_the_fair_share() -> None:
    config = ReservedPoolConfig()
    for fair in (0.0, 0.5, 1.0):
        high = priority(urgency=PRIORITY_CLASSES["high"].urgency, fair_share=fair)
        low = priority(urgency=PRIORITY_CLASSES["low"].urgency, fair_share=fair)
        assert is_high(priority=high, config=config)
        assert not is_high(priority=low, config=config)
    assert PRIORITY_CLASSES["low"].preemptible
    assert not PRIORITY_CLASSES["high"].preemptible


def test_a_request_lands_after_higher_priority_and_after_equal_older_work() -> None:
    queue = [
        entry("w-a", priority=0.7, age_s=30),
        entry("w-b", priority=0.5, age_s=20),
        entry("w-c", priority=0.3),
    ]
    new = candidate(0.5)
    found = preview_position(queue, candidate=new)
    assert (found.position, found.ahead) == (3, 2)
    # The same answer as the placer's order with the request in it.
    assert [e.workload.id for e in order_queue([*queue, new])].index(PREVIEW_ID) == found.ahead


def test_a_higher_priority_request_goes_first_and_an_empty_queue_is_position_one() -> None:
    queue = [entry("w-a", priority=0.5, age_s=30), entry("w-b", priority=0.5, age_s=20)]
    assert preview_position(queue, candidate=candidate(0.9)).position == 1
    assert preview_position([], candidate=candidate(0.1)).position == 1


def test_an_equal_request_submitted_at_the_same_instant_stays_behind_the_real_one() -> None:
    queue = [entry("wl-zzzz", priority=0.5)]
    assert preview_position(queue, candidate=candidate(0.5)).ahead == 1


def test_only_work_that_could_take_the_same_model_counts_as_same_model_ahead() -> None:
    queue = [
        entry("w-a", A100, priority=0.9),
        entry("w-b", H100, priority=0.9),
        entry("w-c", UnitsRequest(units=8), priority=0.9),
    ]
    on_a100 = preview_position(queue, candidate=candidate(0.5))
    assert (on_a100.ahead, on_a100.same_model_ahead) == (3, 2)
    anywhere = preview_position(queue, candidate=candidate(0.5, UnitsRequest(units=8)))
    assert anywhere.same_model_ahead == 3


def test_the_preview_does_not_change_the_queue_it_reads() -> None:
    queue = [entry("w-a", priority=0.5)]
    before = [replace(e) for e in queue]
    preview_position(queue, candidate=candidate(0.9))
    assert queue == before
