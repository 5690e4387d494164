"""SLA credits: which faults are credited, how much, within the monthly cap, once; no database."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from libs.common.events.recovery import IncidentOpenedV1
from libs.common.events.scheduler import (
    AllocationItem,
    WorkloadMigratingV1,
    WorkloadPlacedV1,
    WorkloadRunningV1,
)
from libs.common.testing import handler_context
from services.billing.adapters.price_store_fake import FakePriceStore
from services.billing.adapters.unit_of_work_fake import FakeBillingUnitOfWork
from services.billing.domain.idle import IdlePolicy
from services.billing.domain.ledger import balances
from services.billing.domain.sla import (
    CREDIT_ACCOUNT,
    FAULT_CLASSES,
    CreditDecision,
    FaultClass,
    Incident,
    SlaPolicy,
    WorkloadMove,
    decide_credit,
    fault_class,
    lost_value,
    month_bounds,
)
from services.billing.service.handlers import (
    BillingDeps,
    on_incident_opened,
    on_workload_migrating,
    on_workload_placed,
    on_workload_running,
)
from services.billing.service.metering import MeteringConfig
from tests.unit.billing.factories import T0, allocation, flat_prices, minutes

CATALOG = Path(__file__).parents[3] / "services" / "recovery" / "adapters" / "catalog.yaml"
POLICY = SlaPolicy(
    fault_classes=frozenset({FaultClass.HARDWARE, FaultClass.MEMORY}),
    credit_rate=Decimal("0.5"),
    monthly_cap_micro=1_000_000,
)
INCIDENT = Incident(
    incident_id="inc-1",
    fault_type="xid_79",
    node="node-1",
    gpu_uuid="GPU-1",
    severity="critical",
    detected_at=T0,
    opened_event_id="ev-opened",
)
MOVE = WorkloadMove(
    event_id="ev-migrating",
    workload_id="w1",
    tenant_id="acme",
    from_placement_id="p1",
    to_placement_id="p2",
    incident_id="inc-1",
    reason="gpu lost",
    at=T0 + timedelta(seconds=5),
)
PER_MINUTE = 60_000  # flat_prices: one GPU-hour at 3.60


def _decide(
    incident: Incident = INCIDENT, *, lost: int = 90_000, used: int = 0, policy: SlaPolicy = POLICY
) -> CreditDecision:
    return decide_credit(
        policy=policy,
        incident=incident,
        move=MOVE,
        project="vision",
        running_at=T0 + timedelta(seconds=90),
        running_event_id="ev-running",
        lost_micro=lost,
        credited_this_month_micro=used,
    )


def test_billings_fault_classes_are_the_recovery_catalogs_owners() -> None:
    faults = yaml.safe_load(CATALOG.read_text(encoding="utf-8"))["faults"]
    assert {key: FaultClass(f["owner"]) for key, f in faults.items()} == dict(FAULT_CLASSES)
    assert fault_class("XID-79") is FaultClass.HARDWARE
    assert fault_class("oom") is FaultClass.APPLICATION
    assert fault_class("cosmic_ray") is None


def test_a_counted_platform_fault_is_credited_its_lost_charge_at_the_policys_rate() -> None:
    decision = _decide()
    assert (decision.eligible, decision.amount_micro, decision.capped) == (True, 45_000, False)
    assert decision.fault_class == "hardware"
    assert decision.lost_seconds == 90
    assert decision.entry_id == "credit:inc-1:w1"
    assert "the platform's" in decision.reason


def test_an_application_fault_gives_nothing_and_says_why() -> None:
    oom = replace(INCIDENT, fault_type="xid_43")
    decision = _decide(oom)
    assert (decision.eligible, decision.amount_micro, decision.entry_id) == (False, 0, None)
    assert decision.reason == "application fault (xid_43): not the platform's"
    assert decision.lost_micro == 90_000  # lost all the same: the bill shows what it was


def test_a_platform_fault_outside_the_tenants_policy_gives_nothing() -> None:
    thermal = replace(INCIDENT, fault_type="thermal_runaway")
    decision = _decide(thermal)
    assert (decision.eligible, decision.amount_micro) == (False, 0)
    assert decision.reason == "thermal fault (thermal_runaway): not counted by the tenant's SLA policy"
    unknown = _decide(replace(INCIDENT, fault_type="cosmic_ray"))
    assert (unknown.eligible, unknown.fault_class) == (False, "unclassified")


def test_the_monthly_cap_bounds_what_is_credited() -> None:
    partly = _decide(used=980_000)
    assert (partly.eligible, partly.amount_micro, partly.capped) == (True, 20_000, True)
    assert "monthly cap" in partly.reason
    spent = _decide(used=1_000_000)
    assert (spent.amount_micro, spent.capped, spent.entry_id) == (0, True, None)


def test_the_credit_rate_rounds_half_even_once() -> None:
    assert _decide(lost=3).amount_micro == 2  # 1.5 -> 2
    assert _decide(lost=5).amount_micro == 2  # 2.5 -> 2


def test_a_policy_refuses_a_rate_out_of_range_and_a_negative_cap() -> None:
    with pytest.raises(ValueError, match="credit_rate"):
        SlaPolicy(fault_classes=frozenset(), credit_rate=Decimal(11), monthly_cap_micro=0)
    with pytest.raises(ValueError, match="monthly_cap_micro"):
        SlaPolicy(fault_classes=frozenset(), credit_rate=Decimal(1), monthly_cap_micro=-1)


def test_the_lost_value_is_the_charge_of_the_window_where_the_allocation_ran() -> None:
    ran = allocation(started_at=T0, gpus="1")
    prices = flat_prices()
    assert lost_value([ran], start=T0 + minutes(1), end=T0 + minutes(2.5), prices=prices) == 90_000
    late = allocation(started_at=T0 + minutes(2), gpus="1")
    assert lost_value([late], start=T0 + minutes(1), end=T0 + minutes(2.5), prices=prices) == 30_000


def test_a_month_is_its_utc_calendar_month() -> None:
    start, end = month_bounds(datetime.fromisoformat("2025-12-31T23:59:00+00:00"))
    assert (start.isoformat(), end.isoformat()) == ("2025-12-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00")


async def test_a_move_is_credited_once_whatever_order_and_however_often_its_facts_arrive() -> None:
    uow = FakeBillingUnitOfWork(prices=FakePriceStore(flat_prices().entries))
    deps = BillingDeps(metering=MeteringConfig(), idle=IdlePolicy())
    await _deliver(uow, deps, _placed("p1"), T0 - minutes(10), on_workload_placed)
    await _deliver(uow, deps, _running("p1", T0 - minutes(10)), T0 - minutes(10), on_workload_running)
    await _deliver(uow, deps, _placed("p2"), T0 + minutes(0.5), on_workload_placed)
    migrating = WorkloadMigratingV1(
        workload_id="w1", tenant_id="acme", from_placement_id="p1", to_placement_id="p2", incident_id="inc-1"
    )
    await _deliver(uow, deps, migrating, T0 + minutes(0.5), on_workload_migrating)
    await _deliver(uow, deps, _running("p2", T0 + minutes(1.5)), T0 + minutes(1.5), on_workload_running)
    assert [r.kind for r in uow.ledger.records].count("credit") == 0  # the incident is not known yet
    opened = IncidentOpenedV1(incident_id="inc-1", fault_type="gpu_lost", node="node-1", severity="fatal")
    for _ in range(2):  # republished under a new id: decided once all the same
        await _deliver(uow, deps, opened, T0, on_incident_opened)
        await _deliver(uow, deps, migrating, T0 + minutes(0.5), on_workload_migrating)

    [credit] = [r for r in uow.ledger.records if r.kind == "credit"]
    assert credit.amount_micro == -90_000  # 90 s lost, at rate 1 (the default policy)
    assert credit.incident_id == "inc-1"
    assert {p.account: (p.debit_micro, p.credit_micro) for p in credit.entry.postings} == {
        CREDIT_ACCOUNT: (90_000, 0),
        "tenant:acme:project:vision": (0, 90_000),
    }
    assert sum(balances(r.entry for r in uow.ledger.records).values()) == 0
    charged = sum(r.amount_micro for r in uow.ledger.records if r.kind == "charge")
    assert charged == 11 * PER_MINUTE + PER_MINUTE // 2  # p1 to 01:30, when p2 ran; nothing accrued on p2
    assert len(uow.sla.decisions) == 1


def _placed(pid: str) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id="w1",
        tenant_id="acme",
        placement_id=pid,
        node="node-1",
        allocations=[AllocationItem(gpu_uuid="GPU-1", units=Decimal(8), model="A100-80GB")],
        kind="job",
        tags={"project": "vision"},
    )


def _running(pid: str, at: datetime) -> WorkloadRunningV1:
    return WorkloadRunningV1(
        workload_id="w1", tenant_id="acme", placement_id=pid, node="node-1", started_at=at
    )


async def _deliver(
    uow: FakeBillingUnitOfWork,
    deps: BillingDeps,
    event: Any,
    at: datetime,
    handler: Callable[[Any, Any], Awaitable[None]],
) -> None:
    async with uow:
        await handler(event, handler_context(event, uow=uow, deps=deps, time=at))
        await uow.commit()
