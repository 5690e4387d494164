"""One contract for SLA policies, incidents, moves and credit decisions: FakeSlaStore and SlaStore."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from services.billing.adapters.unit_of_work import PostgresBillingUnitOfWork
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.sla import CreditDecision, FaultClass, Incident, SlaPolicy, WorkloadMove
from services.billing.service.unit_of_work import SlaWrites
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
MARCH = (datetime(2025, 3, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC))


def _incident(incident_id: str = "inc-1", **changes: Any) -> Incident:
    base = Incident(
        incident_id=incident_id,
        fault_type="xid_79",
        node="node-1",
        gpu_uuid="GPU-1",
        severity="critical",
        detected_at=T0,
        opened_event_id=f"ev-open-{incident_id}",
    )
    return replace(base, **changes)


def _move(event_id: str, **changes: Any) -> WorkloadMove:
    base = WorkloadMove(
        event_id=event_id,
        workload_id="wl-1",
        tenant_id="acme",
        from_placement_id="p-old",
        to_placement_id="p-new",
        incident_id="inc-1",
        reason="gpu_fault",
        at=T0,
    )
    return replace(base, **changes)


def _decision(incident_id: str = "inc-1", workload_id: str = "wl-1", **changes: Any) -> CreditDecision:
    base = CreditDecision(
        incident_id=incident_id,
        workload_id=workload_id,
        tenant_id="acme",
        project="vision",
        from_placement_id="p-old",
        to_placement_id="p-new",
        fault_type="xid_79",
        fault_class=FaultClass.HARDWARE.value,
        detected_at=T0,
        running_at=T0 + timedelta(seconds=31),
        eligible=True,
        reason="platform fault: hardware",
        credit_rate=Decimal("0.5"),
        lost_micro=8_612,
        amount_micro=4_306,
        capped=False,
        opened_event_id=f"ev-open-{incident_id}",
        migrating_event_id=f"ev-move-{workload_id}",
        running_event_id=f"ev-run-{workload_id}",
    )
    return replace(base, **changes)


@pytest.fixture(params=["fake", "postgres"])
async def units(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Units[SlaWrites]]:
    if request.param == "fake":
        yield fake_units(FakeBillingUnitOfWork(), lambda uow: uow.sla)
        return
    pool: asyncpg.Pool[Any]
    async with service_pool(isolation, "billing") as pool:
        yield sql_units(pool, PostgresBillingUnitOfWork, lambda uow: uow.sla)


async def test_a_tenants_policy_is_absent_until_put_and_a_second_put_replaces_it(
    units: Units[SlaWrites],
) -> None:
    first = SlaPolicy(
        fault_classes=frozenset({FaultClass.HARDWARE, FaultClass.MEMORY}),
        credit_rate=Decimal("0.25"),
        monthly_cap_micro=5_000_000,
    )
    second = SlaPolicy(fault_classes=frozenset(), credit_rate=Decimal("1.5"), monthly_cap_micro=0)
    async with units() as store:
        assert await store.policy("acme") is None
        await store.put_policy("acme", first)
        await store.put_policy("globex", first)
        assert await store.policy("acme") == first
    async with units() as store:
        await store.put_policy("acme", second)

    async with units() as store:
        assert await store.policy("acme") == second
        assert await store.policy("globex") == first
        assert await store.policy("initech") is None


async def test_an_incident_is_kept_once_and_its_first_close_wins(units: Units[SlaWrites]) -> None:
    opened = _incident(gpu_uuid=None)
    async with units() as store:
        assert await store.incident("inc-1") is None
        await store.record_incident(opened)
        await store.record_incident(_incident("inc-2"))
    async with units() as store:
        await store.record_incident(replace(opened, severity="warning", detected_at=T0 + timedelta(hours=1)))
        assert await store.incident("inc-1") == opened
        closed_at = T0 + timedelta(minutes=3)
        await store.close_incident("inc-1", outcome="recovered", at=closed_at, event_id="ev-close-1")
    async with units() as store:
        await store.close_incident(
            "inc-1", outcome="failed", at=T0 + timedelta(hours=2), event_id="ev-close-2"
        )
        await store.close_incident("inc-9", outcome="recovered", at=T0, event_id="ev-close-9")
        await store.record_incident(opened)  # a redelivered opening does not reopen it

    async with units() as store:
        assert await store.incident("inc-1") == replace(
            opened, outcome="recovered", closed_at=closed_at, closed_event_id="ev-close-1"
        )
        assert await store.incident("inc-2") == _incident("inc-2")
        assert await store.incident("inc-9") is None


async def test_moves_are_kept_once_and_read_by_incident_and_by_new_placement_oldest_first(
    units: Units[SlaWrites],
) -> None:
    later = _move("ev-b", workload_id="wl-1", at=T0 + timedelta(seconds=5))
    earlier = _move("ev-c", workload_id="wl-2", to_placement_id="p-other", at=T0)
    tied = _move("ev-a", workload_id="wl-3", at=T0 + timedelta(seconds=5))
    unnamed = _move("ev-d", workload_id="wl-4", incident_id="", at=T0 + timedelta(seconds=9))
    rebalanced = _move("ev-e", workload_id="wl-5", incident_id=None)
    elsewhere = _move("ev-f", workload_id="wl-6", incident_id="inc-2", to_placement_id="p-third")
    async with units() as store:
        for move in (later, earlier, tied, unnamed, rebalanced, elsewhere):
            await store.record_move(move)
    async with units() as store:
        await store.record_move(replace(later, incident_id="inc-2", to_placement_id="p-third"))

    async with units() as store:
        assert await store.moves_for_incident("inc-1") == [earlier, tied, later]
        assert await store.moves_for_incident("inc-2") == [elsewhere]
        assert await store.moves_for_incident("inc-9") == []
        # only moves that name an incident (even an empty name) count; a rebalancing move is never credited
        assert await store.moves_into("p-new") == [tied, later, unnamed]
        assert await store.moves_into("p-third") == [elsewhere]
        assert await store.moves_into("p-old") == []


async def test_a_decision_is_recorded_once_and_a_second_record_of_it_changes_nothing(
    units: Units[SlaWrites],
) -> None:
    credited = _decision(entry_id="entry-1")
    nothing = _decision(
        workload_id="wl-2", eligible=False, reason="application fault", amount_micro=0, credit_rate=Decimal(0)
    )
    async with units() as store:
        assert await store.decision("inc-1", "wl-1") is None
        assert await store.record_decision(credited)
        assert await store.decision("inc-1", "wl-1") == credited
        assert await store.record_decision(nothing)
    async with units() as store:
        assert not await store.record_decision(replace(credited, amount_micro=9_999, entry_id=None))
        assert not await store.record_decision(credited)

    async with units() as store:
        assert await store.decision("inc-1", "wl-1") == credited
        assert await store.decision("inc-1", "wl-2") == nothing
        assert await store.decision("inc-2", "wl-1") is None
        assert await store.credited_between("acme", start=MARCH[0], end=MARCH[1]) == 4_306


async def test_credited_between_sums_one_tenants_credits_that_ran_again_inside_the_window(
    units: Units[SlaWrites],
) -> None:
    start, end = MARCH
    decisions = [
        _decision("inc-1", "wl-at-start", running_at=start, amount_micro=1),
        _decision("inc-1", "wl-inside", running_at=T0, amount_micro=20),
        _decision("inc-2", "wl-last", running_at=end - timedelta(microseconds=1), amount_micro=300),
        _decision("inc-2", "wl-at-end", running_at=end, amount_micro=4_000),
        _decision("inc-3", "wl-before", running_at=start - timedelta(microseconds=1), amount_micro=50_000),
        _decision("inc-3", "wl-other-tenant", tenant_id="globex", running_at=T0, amount_micro=600_000),
        _decision("inc-3", "wl-nothing", running_at=T0, amount_micro=0, eligible=False),
    ]
    async with units() as store:
        assert await store.credited_between("acme", start=start, end=end) == 0
        for decision in decisions:
            assert await store.record_decision(decision)

    async with units() as store:
        assert await store.credited_between("acme", start=start, end=end) == 321
        assert await store.credited_between("globex", start=start, end=end) == 600_000
        assert await store.credited_between("acme", start=end, end=end + timedelta(days=30)) == 4_000
        assert await store.credited_between("initech", start=start, end=end) == 0


async def test_sla_writes_of_a_unit_of_work_that_does_not_commit_are_not_kept(
    units: Units[SlaWrites],
) -> None:
    kept = SlaPolicy(
        fault_classes=frozenset({FaultClass.DRIVER}), credit_rate=Decimal(1), monthly_cap_micro=7
    )
    async with units() as store:
        await store.put_policy("acme", kept)
        await store.record_incident(_incident("inc-1"))
    async with units.rolled_back() as store:
        await store.put_policy("acme", replace(kept, monthly_cap_micro=999))
        await store.put_policy("globex", kept)
        await store.close_incident("inc-1", outcome="recovered", at=T0, event_id="ev-close-1")
        await store.record_incident(_incident("inc-2"))
        await store.record_move(_move("ev-a"))
        assert await store.record_decision(_decision())
        assert await store.credited_between("acme", start=MARCH[0], end=MARCH[1]) == 4_306

    async with units() as store:
        assert await store.policy("acme") == kept
        assert await store.policy("globex") is None
        assert await store.incident("inc-1") == _incident("inc-1")
        assert await store.incident("inc-2") is None
        assert await store.moves_for_incident("inc-1") == []
        assert await store.moves_into("p-new") == []
        assert await store.decision("inc-1", "wl-1") is None
        assert await store.credited_between("acme", start=MARCH[0], end=MARCH[1]) == 0
        assert await store.record_decision(_decision())
