"""Journal entries as the ledger table keeps them: each with the attributes of the charge it posts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from services.billing.domain.ledger import JournalEntry, post_charge, post_charges, reverse
from services.billing.domain.rating import ChargeLine

__all__ = ["ChargeRecord", "EntryRecord", "record_for_charge", "record_for_reversal", "records_for_charges"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryRecord:
    """A journal entry with the charge attributes the ledger table keeps beside it."""

    entry: JournalEntry
    allocation_id: str
    workload_id: str
    resource: str
    pricing_class: str
    period_start: datetime
    period_end: datetime
    basis: str
    quantity_hours: Decimal
    compute_unit_hours: Decimal
    price_id: str
    micro_per_hour: int
    amount_micro: int  # change of the receivable: negative on a reversal or a credit
    kind: str = "charge"  # charge (or its reversal) or credit
    opened_by_event_id: str | None = None  # the event that opened the billed interval
    closed_by_event_id: str | None = None  # the event that closed it, when known at posting
    incident_id: str | None = None  # a credit's incident


@dataclass(frozen=True, slots=True, kw_only=True)
class ChargeRecord:
    """A charge or reversal as the ledger lists it: its entry's keys and charge attributes, no postings."""

    entry_id: str
    source_event_id: str
    at: datetime
    tenant_id: str
    project: str
    allocation_id: str
    workload_id: str
    resource: str
    pricing_class: str
    period_start: datetime
    period_end: datetime
    basis: str
    quantity_hours: Decimal
    compute_unit_hours: Decimal
    price_id: str
    micro_per_hour: int
    amount_micro: int  # negative on a reversal or a credit
    reverses_entry_id: str | None
    kind: str = "charge"
    opened_by_event_id: str | None = None
    closed_by_event_id: str | None = None
    incident_id: str | None = None


def record_for_charge(
    line: ChargeLine, *, opened_by: str | None = None, closed_by: str | None = None
) -> EntryRecord:
    """The entry posting one charge line, with the events that opened (and, at the end, closed) its
    allocation's billed interval."""
    return _charge_record(line, post_charge(line, opened_by=opened_by), opened_by, closed_by)


def records_for_charges(
    lines: Iterable[ChargeLine], *, opened_by: str | None = None, closed_by: str | None = None
) -> list[EntryRecord]:
    """record_for_charge of each line (entries built by post_charges)."""
    lines = list(lines)
    entries = post_charges(lines, opened_by=opened_by)
    return [
        _charge_record(line, entry, opened_by, closed_by) for line, entry in zip(lines, entries, strict=True)
    ]


def _charge_record(
    line: ChargeLine, entry: JournalEntry, opened_by: str | None, closed_by: str | None
) -> EntryRecord:
    return EntryRecord(
        entry=entry,
        allocation_id=line.allocation_id,
        workload_id=line.workload_id,
        resource=line.resource.label(),
        pricing_class=line.pricing_class.value,
        period_start=line.period_start,
        period_end=line.period_end,
        basis=line.basis.value,
        quantity_hours=line.quantity_hours,
        compute_unit_hours=line.compute_unit_hours,
        price_id=line.price_id,
        micro_per_hour=line.micro_per_hour,
        amount_micro=line.amount_micro,
        opened_by_event_id=opened_by,
        closed_by_event_id=closed_by,
    )


def record_for_reversal(
    original: EntryRecord, *, reason: str, at: datetime, closed_by: str | None = None
) -> EntryRecord:
    """The entry that undoes `original` (closed by the end event `closed_by`); quantities and amount change
    sign."""
    return EntryRecord(
        entry=reverse(original.entry, reason=reason, at=at),
        allocation_id=original.allocation_id,
        workload_id=original.workload_id,
        resource=original.resource,
        pricing_class=original.pricing_class,
        period_start=original.period_start,
        period_end=original.period_end,
        basis=original.basis,
        quantity_hours=-original.quantity_hours,
        compute_unit_hours=-original.compute_unit_hours,
        price_id=original.price_id,
        micro_per_hour=original.micro_per_hour,
        amount_micro=-original.amount_micro,
        kind=original.kind,
        opened_by_event_id=original.opened_by_event_id,
        closed_by_event_id=closed_by,
        incident_id=original.incident_id,
    )
