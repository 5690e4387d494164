"""An in-memory twin of LedgerStore for unit tests: the append-only journal, no database."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from services.billing.domain.entry_records import EntryRecord

__all__ = ["FakeLedgerStore"]


class FakeLedgerStore:
    """Posted entries (``records``, in posting order), each once, as LedgerStore keeps them."""

    def __init__(self) -> None:
        self.records: list[EntryRecord] = []

    async def post(self, records: Sequence[EntryRecord]) -> list[EntryRecord]:
        """Append entries not seen before; returns those that were new.

        An entry is a repeat when its id, its source event or the entry it reverses is already in the
        journal (or earlier in ``records``), as the table's unique keys make it.
        """
        ids = {r.entry.entry_id for r in self.records}
        sources = {r.entry.source_event_id for r in self.records}
        reversed_ids = {r.entry.reverses_entry_id for r in self.records} - {None}
        fresh: list[EntryRecord] = []
        for record in records:
            e = record.entry
            if e.entry_id in ids or e.source_event_id in sources or e.reverses_entry_id in reversed_ids:
                continue
            ids.add(e.entry_id)
            sources.add(e.source_event_id)
            if e.reverses_entry_id is not None:
                reversed_ids.add(e.reverses_entry_id)
            self.records.append(record)
            fresh.append(record)
        return fresh

    async def live_charges_after(self, allocation_id: str, at: datetime) -> list[EntryRecord]:
        """An allocation's unreversed charges (not credits) for periods ending after `at`, by period start."""
        reversed_ids = {r.entry.reverses_entry_id for r in self.records}
        live = [
            r
            for r in self.records
            if r.allocation_id == allocation_id
            and r.kind == "charge"
            and r.period_end > at
            and r.entry.reverses_entry_id is None
            and r.entry.entry_id not in reversed_ids
        ]
        return sorted(live, key=lambda r: r.period_start)
