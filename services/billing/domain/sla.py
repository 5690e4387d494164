"""SLA credits: GPU time a workload lost to the platform's own fault, given back under its tenant's policy.

A workload moved for an incident lost the time from the incident's detection to running again on its new
placement. Billing goes on charging the placement it left until then (a move is one instant), so that
window is charged; when the fault is the platform's (the recovery catalog's owner is not the application)
and the tenant's policy counts its class, the window's charge times the policy's rate is credited, up to
the policy's monthly cap. A fault the workload caused itself (an application XID, OOM) is recorded with
the reason it gives nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction

from services.billing.domain.budgets import month_of
from services.billing.domain.entry_records import EntryRecord
from services.billing.domain.ledger import JournalEntry, Posting, receivable_account
from services.billing.domain.prices import PriceList
from services.billing.domain.rating import DEFAULT_INTERVAL, Allocation, rate

__all__ = [
    "CREDIT_ACCOUNT",
    "DEFAULT_POLICY",
    "FAULT_CLASSES",
    "MAX_CREDIT_RATE",
    "PLATFORM_CLASSES",
    "CreditDecision",
    "FaultClass",
    "Incident",
    "SlaPolicy",
    "WorkloadMove",
    "credit_entry_id",
    "credit_record",
    "decide_credit",
    "fault_class",
    "lost_value",
    "month_bounds",
]

#: The platform's expense account that SLA credits are debited to.
CREDIT_ACCOUNT = "expense:sla_credits"
MAX_CREDIT_RATE = Decimal(10)


class FaultClass(StrEnum):
    """Who a fault belongs to: the recovery catalog's `owner` of its fault type."""

    APPLICATION = "application"
    DRIVER = "driver"
    HARDWARE = "hardware"
    INTERCONNECT = "interconnect"
    MEMORY = "memory"
    THERMAL = "thermal"


_A, _D, _H, _I, _M, _T = (
    FaultClass.APPLICATION,
    FaultClass.DRIVER,
    FaultClass.HARDWARE,
    FaultClass.INTERCONNECT,
    FaultClass.MEMORY,
    FaultClass.THERMAL,
)
#: Fault type (recovery's catalog key) -> class; held equal to services/recovery/adapters/catalog.yaml
#: by a unit test (services do not import each other).
FAULT_CLASSES: Mapping[str, FaultClass] = {
    "xid_8": _A, "xid_13": _A, "xid_31": _A, "xid_43": _A, "xid_45": _A, "xid_46": _D, "xid_48": _M,
    "xid_54": _H, "xid_62": _D, "xid_63": _M, "xid_64": _M, "xid_74": _I, "xid_79": _H, "xid_92": _M,
    "xid_94": _M, "xid_95": _M, "xid_109": _A, "xid_119": _D, "xid_120": _D, "xid_unknown": _D,
    "ecc_dbe_burst": _M, "thermal_runaway": _T, "power_capping": _T, "gpu_lost": _H,
    "node_agent_silent": _H, "pcie_saturation": _I, "oom": _A,
}  # fmt: skip


def fault_class(fault_type: str) -> FaultClass | None:
    """The class of a catalog fault type (`xid-79` and `xid_79` alike); None when billing does not know it."""
    return FAULT_CLASSES.get(fault_type.strip().lower().replace("-", "_"))


@dataclass(frozen=True, slots=True, kw_only=True)
class SlaPolicy:
    """Which fault classes a tenant is credited for, at what fraction of the lost time's charge, and the
    most it is credited per calendar month (UTC)."""

    fault_classes: frozenset[FaultClass]
    credit_rate: Decimal
    monthly_cap_micro: int

    def __post_init__(self) -> None:
        if not Decimal(0) <= self.credit_rate <= MAX_CREDIT_RATE:
            raise ValueError(f"credit_rate must be between 0 and {MAX_CREDIT_RATE}")
        if self.monthly_cap_micro < 0:
            raise ValueError("monthly_cap_micro must not be negative")


#: Every class but the application's: the faults that are the platform's.
PLATFORM_CLASSES = frozenset(c for c in FaultClass if c is not FaultClass.APPLICATION)
DEFAULT_POLICY = SlaPolicy(
    fault_classes=PLATFORM_CLASSES, credit_rate=Decimal(1), monthly_cap_micro=1_000_000_000
)


def month_bounds(at: datetime) -> tuple[datetime, datetime]:
    """The calendar month (UTC) holding `at`, as [start, end)."""
    utc = at.astimezone(UTC)
    start = utc.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return start, end


@dataclass(frozen=True, slots=True, kw_only=True)
class Incident:
    """A recovery incident as billing learned it: the fault, where, and when it was detected."""

    incident_id: str
    fault_type: str
    node: str
    gpu_uuid: str | None
    severity: str
    detected_at: datetime
    opened_event_id: str
    outcome: str | None = None
    closed_at: datetime | None = None
    closed_event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadMove:
    """The scheduler moving a workload between placements, for an incident or not."""

    event_id: str
    workload_id: str
    tenant_id: str
    from_placement_id: str
    to_placement_id: str
    incident_id: str | None
    reason: str
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class CreditDecision:
    """What one (incident, workload) is credited, and why; kept whether or not anything is credited."""

    incident_id: str
    workload_id: str
    tenant_id: str
    project: str
    from_placement_id: str
    to_placement_id: str
    fault_type: str
    fault_class: str
    detected_at: datetime
    running_at: datetime
    eligible: bool
    reason: str
    credit_rate: Decimal
    lost_micro: int  # what the lost window was charged (at the prices in force)
    amount_micro: int  # credited: lost_micro x rate, within the month's cap
    capped: bool
    opened_event_id: str
    migrating_event_id: str
    running_event_id: str
    entry_id: str | None = None

    @property
    def lost_seconds(self) -> float:
        """Seconds from detection to running again (0 when it ran again before the detection)."""
        return max((self.running_at - self.detected_at).total_seconds(), 0.0)


def lost_value(
    allocations: Iterable[Allocation],
    *,
    start: datetime,
    end: datetime,
    prices: PriceList,
    interval: timedelta = DEFAULT_INTERVAL,
) -> int:
    """What [start, end) of these allocations is charged, on the charge grid; only where each ran."""
    total = 0
    for a in allocations:
        lo, hi = max(start, a.started_at), min(end, a.ended_at or end)
        if hi <= lo:
            continue
        window = replace(a, started_at=lo, ended_at=hi, end_reason=None)
        rating = rate(allocation=window, rated_until=None, now=hi, prices=prices, interval=interval)
        total += sum(line.amount_micro for line in rating.lines)
    return total


def decide_credit(
    *,
    policy: SlaPolicy,
    incident: Incident,
    move: WorkloadMove,
    project: str,
    running_at: datetime,
    running_event_id: str,
    lost_micro: int,
    credited_this_month_micro: int,
) -> CreditDecision:
    """Credit the lost window's charge at the policy's rate if the fault is the platform's and counted,
    within what is left of the month's cap (`credited_this_month_micro` already given this month)."""
    cls = fault_class(incident.fault_type)
    eligible, reason = _eligibility(cls, incident.fault_type, policy)
    amount, capped = 0, False
    if eligible:
        wanted = round(Fraction(lost_micro) * Fraction(policy.credit_rate))  # half-even, once
        room = max(policy.monthly_cap_micro - credited_this_month_micro, 0)
        amount, capped = min(wanted, room), wanted > room
        reason = _credited_reason(cls, incident.fault_type, policy, running_at, capped, room)
        if lost_micro == 0:
            reason = f"{reason}; nothing was charged for the lost time"
    return CreditDecision(
        incident_id=incident.incident_id,
        workload_id=move.workload_id,
        tenant_id=move.tenant_id,
        project=project,
        from_placement_id=move.from_placement_id,
        to_placement_id=move.to_placement_id,
        fault_type=incident.fault_type,
        fault_class=cls.value if cls else "unclassified",
        detected_at=incident.detected_at,
        running_at=running_at,
        eligible=eligible,
        reason=reason,
        credit_rate=policy.credit_rate,
        lost_micro=lost_micro,
        amount_micro=amount,
        capped=capped,
        opened_event_id=incident.opened_event_id,
        migrating_event_id=move.event_id,
        running_event_id=running_event_id,
        entry_id=credit_entry_id(incident.incident_id, move.workload_id) if amount > 0 else None,
    )


def _eligibility(cls: FaultClass | None, fault_type: str, policy: SlaPolicy) -> tuple[bool, str]:
    if cls is None:
        return False, f"unclassified fault ({fault_type}): not in the fault catalog billing knows"
    if cls is FaultClass.APPLICATION and cls not in policy.fault_classes:
        return False, f"application fault ({fault_type}): not the platform's"
    if cls not in policy.fault_classes:
        return False, f"{cls.value} fault ({fault_type}): not counted by the tenant's SLA policy"
    return True, ""


def _credited_reason(
    cls: FaultClass | None, fault_type: str, policy: SlaPolicy, at: datetime, capped: bool, room: int
) -> str:
    owner = cls.value if cls else "unclassified"
    text = f"{owner} fault ({fault_type}): the platform's; lost time credited at rate {policy.credit_rate}"
    if capped:
        text += (
            f"; capped by the monthly cap ({room} micro left of {policy.monthly_cap_micro} in {month_of(at)})"
        )
    return text


def credit_entry_id(incident_id: str, workload_id: str) -> str:
    """The ledger entry of one (incident, workload) credit."""
    return f"credit:{incident_id}:{workload_id}"


def credit_record(
    decision: CreditDecision, *, allocation: Allocation, price_id: str, micro_per_hour: int, basis: str
) -> EntryRecord:
    """The balanced entry of a credit: debit the platform's SLA expense, credit the tenant's receivable.

    Keyed by the incident's opened event and the scheduler's migrating event (unique per workload and
    incident); it carries no usage (zero hours), so fair share and usage stay as charged.
    """
    if decision.amount_micro <= 0 or decision.entry_id is None:
        raise ValueError("only a decision that credits something is posted")
    amount = decision.amount_micro
    entry = JournalEntry(
        entry_id=decision.entry_id,
        source_event_id=f"{decision.opened_event_id}|{decision.migrating_event_id}",
        at=decision.running_at,
        description=(
            f"SLA credit: incident {decision.incident_id} ({decision.fault_type}), "
            f"{decision.lost_seconds:g} s lost"
        ),
        tenant_id=decision.tenant_id,
        project=decision.project,
        postings=(
            Posting(account=CREDIT_ACCOUNT, debit_micro=amount),
            Posting(
                account=receivable_account(tenant_id=decision.tenant_id, project=decision.project),
                credit_micro=amount,
            ),
        ),
    )
    return EntryRecord(
        entry=entry,
        allocation_id=allocation.allocation_id,
        workload_id=decision.workload_id,
        resource=allocation.resource.label(),
        pricing_class=allocation.pricing_class.value,
        period_start=decision.detected_at,
        period_end=max(decision.running_at, decision.detected_at),
        basis=basis,
        quantity_hours=Decimal(0),
        compute_unit_hours=Decimal(0),
        price_id=price_id,
        micro_per_hour=micro_per_hour,
        amount_micro=-amount,
        kind="credit",
        opened_by_event_id=decision.opened_event_id,
        closed_by_event_id=decision.running_event_id,
        incident_id=decision.incident_id,
    )
