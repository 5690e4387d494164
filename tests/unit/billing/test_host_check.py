"""The ledger checked against the hosts' own facts, per placement (services/billing/domain/host_facts.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from services.billing.domain.host_facts import (
    BilledAllocation,
    EndBasis,
    HostFact,
    HostFactKind,
    check_against_hosts,
)
from services.billing.domain.rating import Allocation, EndReason, rate
from tests.unit.billing.factories import T0, allocation, flat_prices, minutes

PER_MINUTE = 60_000  # flat_prices: one GPU-hour at 3.60


def _host(kind: HostFactKind, placement_id: str, at: datetime, workload_id: str = "w1") -> HostFact:
    return HostFact(
        kind=kind, workload_id=workload_id, tenant_id="acme", placement_id=placement_id, node="n1", at=at
    )


def _billed(
    placement_id: str,
    *,
    start: datetime,
    end: datetime | None,
    reason: EndReason | None = None,
    rated_until: datetime | None = None,
    running: bool = True,
) -> BilledAllocation:
    """An allocation as metering would have left it, with the ledger's charges of [start, end)."""
    a: Allocation = replace(allocation(f"{placement_id}/A100"), workload_id="w1", started_at=start)
    closed = replace(a, ended_at=end, end_reason=reason) if end is not None else a
    upto = end if end is not None else (rated_until or start)
    lines = rate(allocation=closed, rated_until=None, now=upto, prices=flat_prices()).lines if running else ()
    return BilledAllocation(
        allocation=closed,
        placement_id=placement_id,
        running=running,
        open=end is None,
        rated_until=upto,
        ledger_micro=sum(line.amount_micro for line in lines),
    )


def test_an_end_billed_when_the_scheduler_came_back_is_an_over_charge_against_the_hosts_exit() -> None:
    # The old rule: the end charged at the scheduler's late event (minute 10), the host exited at 5.
    billed = [_billed("p1", start=T0, end=T0 + minutes(10), reason=EndReason.COMPLETED)]
    hosts = [_host(HostFactKind.RUNNING, "p1", T0), _host(HostFactKind.EXITED, "p1", T0 + minutes(5))]

    result = check_against_hosts(allocations=billed, host_facts=hosts, prices=flat_prices())

    assert not result.equal
    [check] = result.differences
    assert (check.placement_id, check.end_basis, check.host_ended_at) == (
        "p1",
        EndBasis.HOST_EXIT,
        T0 + minutes(5),
    )
    assert (check.expected_micro, check.ledger_micro, check.difference_micro) == (
        5 * PER_MINUTE,
        10 * PER_MINUTE,
        5 * PER_MINUTE,
    )


def test_a_charge_from_the_hosts_start_to_its_exit_is_equal() -> None:
    billed = [_billed("p1", start=T0 + minutes(1), end=T0 + minutes(5), reason=EndReason.FAILED)]
    hosts = [
        _host(HostFactKind.RUNNING, "p1", T0 + minutes(1)),
        _host(HostFactKind.RUNNING, "p1", T0 + minutes(1)),  # re-sent
        _host(HostFactKind.EXITED, "p1", T0 + minutes(5)),
    ]

    result = check_against_hosts(allocations=billed, host_facts=hosts, prices=flat_prices())

    assert result.equal
    assert [c.expected_micro for c in result.checked] == [4 * PER_MINUTE]


def test_a_move_charged_from_the_new_placement_and_not_between_is_two_differences() -> None:
    # The old rule: the old placement closed at the pass (minute 10), the new one charged from its
    # placement though the host ran it only at 10:31.
    moved, resumed = T0 + minutes(10), T0 + minutes(10) + timedelta(seconds=31)
    hosts = [_host(HostFactKind.RUNNING, "p1", T0), _host(HostFactKind.RUNNING, "p2", resumed)]
    old_rule = [
        _billed("p1", start=T0, end=moved, reason=EndReason.MIGRATED),
        _billed("p2", start=moved, end=None, rated_until=T0 + minutes(20)),
    ]
    new_rule = [
        _billed("p1", start=T0, end=resumed, reason=EndReason.MIGRATED),
        _billed("p2", start=resumed, end=None, rated_until=T0 + minutes(20)),
    ]

    old = check_against_hosts(allocations=old_rule, host_facts=hosts, prices=flat_prices())
    new = check_against_hosts(allocations=new_rule, host_facts=hosts, prices=flat_prices())

    assert [(c.placement_id, c.end_basis, c.difference_micro) for c in old.differences] == [
        ("p1", EndBasis.HOST_MOVE, -31 * PER_MINUTE // 60),  # the move's seconds left uncharged
        ("p2", EndBasis.OPEN, 31 * PER_MINUTE // 60),  # charged before it ran
    ]
    assert new.equal


def test_a_cancel_the_host_never_reports_is_checked_at_the_schedulers_end() -> None:
    billed = [_billed("p1", start=T0, end=T0 + minutes(3), reason=EndReason.CANCELLED)]
    hosts = [_host(HostFactKind.RUNNING, "p1", T0)]

    result = check_against_hosts(allocations=billed, host_facts=hosts, prices=flat_prices())

    assert result.equal
    assert [c.end_basis for c in result.checked] == [EndBasis.SCHEDULER]


def test_a_charge_for_a_placement_no_host_ever_ran_is_a_difference() -> None:
    billed = [
        _billed("p1", start=T0, end=T0 + minutes(2), reason=EndReason.COMPLETED),
        _billed("p2", start=T0, end=T0 + minutes(2), reason=EndReason.CANCELLED, running=False),
    ]

    result = check_against_hosts(allocations=billed, host_facts=[], prices=flat_prices())

    assert [(c.placement_id, c.end_basis, c.difference_micro) for c in result.checked] == [
        ("p1", EndBasis.NEVER_RAN, 2 * PER_MINUTE),
        ("p2", EndBasis.NEVER_RAN, 0),  # held, never run, never charged: nothing to say
    ]


def test_an_open_placement_accruing_past_its_hosts_exit_is_an_over_charge_until_it_is_closed() -> None:
    billed = [_billed("p1", start=T0, end=None, rated_until=T0 + minutes(8))]
    hosts = [_host(HostFactKind.RUNNING, "p1", T0), _host(HostFactKind.EXITED, "p1", T0 + minutes(5.5))]

    result = check_against_hosts(allocations=billed, host_facts=hosts, prices=flat_prices())

    [check] = result.differences
    assert (check.expected_micro, check.ledger_micro) == (5 * PER_MINUTE + PER_MINUTE // 2, 8 * PER_MINUTE)


def test_an_open_placement_rated_short_of_now_is_compared_up_to_where_it_is_rated() -> None:
    billed = [_billed("p1", start=T0, end=None, rated_until=T0 + minutes(4))]
    hosts = [_host(HostFactKind.RUNNING, "p1", T0)]

    result = check_against_hosts(allocations=billed, host_facts=hosts, prices=flat_prices())

    assert result.equal
    assert [(c.end_basis, c.expected_micro) for c in result.checked] == [(EndBasis.OPEN, 4 * PER_MINUTE)]
