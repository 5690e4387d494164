"""One contract for FakeStateStore and StateStore: the signal queue alerting's handlers write, and the list of
pending alerts the evaluator keeps for the API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Protocol

import asyncpg
import pytest

from services.alerting.adapters.engine_state_store import StateStore
from services.alerting.adapters.engine_state_store_fake import FakeStateStore
from services.alerting.adapters.unit_of_work import PostgresAlertingUnitOfWork
from services.alerting.adapters.unit_of_work_fake import FakeAlertingUnitOfWork
from services.alerting.domain.alert_lifecycle import AlertState, Phase, Transition, TransitionKind, transition
from services.alerting.domain.rules import Comparator, Rule
from services.alerting.domain.signals import Signal, budget_signal, fault_signal
from services.alerting.service.unit_of_work import PendingList, SignalQueue
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, 0, 123456, tzinfo=UTC)


#: A listed pending alert as the API reads it: rule, tenant, severity, labels, annotations, value, active_at,
#: fires_at, by fingerprint.
Listed = dict[str, tuple[Any, ...]]


class StateStoreLike(SignalQueue, PendingList, Protocol):
    """What the contract drives: the queue and the pending list, on one store."""


@dataclass(frozen=True, slots=True)
class Subject:
    units: Units[StateStoreLike]
    queued: Callable[[], Awaitable[list[Signal]]]  # what the evaluator takes, oldest first
    listed: Callable[[], Awaitable[Listed]]


def _listed(c: Transition) -> tuple[Any, ...]:
    a = c.alert
    return (
        c.rule,
        a.labels.get("tenant"),
        a.labels["severity"],
        a.labels,
        a.annotations,
        a.value,
        a.starts_at,
        c.fires_at,
    )


def fake_subject() -> Subject:
    fake = FakeStateStore()

    async def queued() -> list[Signal]:
        return list(fake.signals)

    async def listed() -> Listed:
        return {fp: _listed(c) for fp, c in fake.pending.items()}

    units = fake_units(FakeAlertingUnitOfWork(fake), lambda uow: uow.signals)
    return Subject(units=units, queued=queued, listed=listed)


def sql_subject(pool: asyncpg.Pool[Any]) -> Subject:
    async def queued() -> list[Signal]:
        async with pool.acquire() as conn:
            return [signal for _, signal in await StateStore(conn).take_signals()]

    async def listed() -> Listed:
        columns = "rule, tenant, severity, labels, annotations, value, active_at, fires_at"
        rows = await pool.fetch(f"SELECT fingerprint, {columns} FROM pending_alerts")
        return {r["fingerprint"]: tuple(r[k] for k in columns.split(", ")) for r in rows}

    units = sql_units(pool, PostgresAlertingUnitOfWork, lambda uow: uow.signals)
    return Subject(units=units, queued=queued, listed=listed)


@pytest.fixture(params=["fake", "postgres"])
async def subject(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Subject]:
    if request.param == "fake":
        yield fake_subject()
        return
    async with service_pool(isolation, "alerting") as pool:
        yield sql_subject(pool)


FAULT = fault_signal(kind="xid", node="n1", gpu="g1", xid=79, at=T0, evidence={"count": 3})
LOST = fault_signal(kind="lost", node="n1", gpu="g2", xid=None, at=T0 + timedelta(seconds=1), evidence={})
BUDGET = budget_signal(
    tenant="acme",
    project="vision",
    month="2025-03",
    threshold_pct=100,
    hard_stop=True,
    at=datetime(2025, 3, 14, 11, 30, tzinfo=timezone(timedelta(hours=2))),
)


async def test_signals_are_queued_in_the_order_they_were_written_across_units_of_work(
    subject: Subject,
) -> None:
    async with subject.units() as queue:
        await queue.queue_signal(BUDGET)
        await queue.queue_signal(FAULT)
    async with subject.units() as queue:
        await queue.queue_signal(LOST)

    assert await subject.queued() == [BUDGET, FAULT, LOST]


async def test_a_signal_comes_back_whole_and_the_same_signal_twice_is_queued_twice(subject: Subject) -> None:
    async with subject.units() as queue:
        await queue.queue_signal(FAULT)
        await queue.queue_signal(FAULT)

    queued = await subject.queued()
    assert queued == [FAULT, FAULT], "the queue keeps every signal: the evaluator folds repeats"
    assert queued[0].model_dump() == FAULT.model_dump()
    assert queued[0].at == T0


async def test_signals_of_a_unit_of_work_that_does_not_commit_are_not_queued(subject: Subject) -> None:
    async with subject.units() as queue:
        await queue.queue_signal(FAULT)
    async with subject.units.rolled_back() as queue:
        await queue.queue_signal(LOST)
        await queue.queue_signal(BUDGET)

    assert await subject.queued() == [FAULT]


RULE = Rule(
    name="MemHigh",
    metric="fb_used_pct",
    comparator=Comparator.GT,
    threshold=90,
    for_duration=timedelta(seconds=5),
    summary="memory above 90%",
)


def _change(
    kind: TransitionKind, *, gpu: str, tenant: str | None = "acme", value: float = 95.5
) -> Transition:
    labels = {"gpu": gpu, "node": "n1", **({"tenant": tenant} if tenant else {})}
    state = AlertState(phase=Phase.PENDING, active_at=T0, last_seen=T0, value=value)
    return transition(kind, rule=RULE, series=labels, state=state, now=T0 + timedelta(seconds=1))


async def test_a_pending_transition_lists_the_alert_whole_and_a_later_one_replaces_it(
    subject: Subject,
) -> None:
    one, two = (
        _change(TransitionKind.PENDING, gpu="g1"),
        _change(TransitionKind.PENDING, gpu="g2", tenant=None),
    )
    async with subject.units() as store:
        await store.record_pending([one, two])
    again = _change(TransitionKind.PENDING, gpu="g1", value=97.0)
    async with subject.units() as store:
        await store.record_pending([again])

    listed = await subject.listed()
    assert listed == {one.alert.fingerprint: _listed(again), two.alert.fingerprint: _listed(two)}
    rule, tenant, severity, _, annotations, value, active_at, fires_at = listed[one.alert.fingerprint]
    assert (rule, tenant, severity, value) == ("MemHigh", "acme", "warning", 97.0)
    assert annotations["summary"] == "memory above 90%"
    assert (active_at, fires_at) == (T0, T0 + timedelta(seconds=5))
    assert listed[two.alert.fingerprint][1] is None


async def test_firing_cancelled_and_resolved_transitions_take_an_alert_off_the_list(subject: Subject) -> None:
    gpus = ["g1", "g2", "g3", "g4"]
    async with subject.units() as store:
        await store.record_pending([_change(TransitionKind.PENDING, gpu=g) for g in gpus])
    ended = [
        _change(TransitionKind.FIRING, gpu="g1"),
        _change(TransitionKind.CANCELLED, gpu="g2"),
        _change(TransitionKind.RESOLVED, gpu="g3"),
        _change(TransitionKind.CANCELLED, gpu="g4"),
        _change(TransitionKind.PENDING, gpu="g4"),  # pending again within the same slice: listed
    ]
    async with subject.units() as store:
        await store.record_pending(ended)

    assert list(await subject.listed()) == [ended[-1].alert.fingerprint]


async def test_taking_over_leaves_exactly_the_given_pending_alerts_and_a_rollback_changes_nothing(
    subject: Subject,
) -> None:
    old, kept = _change(TransitionKind.PENDING, gpu="g1"), _change(TransitionKind.PENDING, gpu="g2")
    async with subject.units() as store:
        await store.record_pending([old, kept])
    async with subject.units.rolled_back() as store:
        await store.replace_pending([])
        await store.record_pending([_change(TransitionKind.PENDING, gpu="g3")])
    assert set(await subject.listed()) == {old.alert.fingerprint, kept.alert.fingerprint}

    async with subject.units() as store:
        await store.replace_pending([kept])
    assert list(await subject.listed()) == [kept.alert.fingerprint]
    async with subject.units() as store:
        await store.replace_pending([])
    assert await subject.listed() == {}
