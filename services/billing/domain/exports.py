"""Ledger exports: the columns, the totals of what an export holds, and the rows of one project."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.billing.domain.ledger import LedgerRow

__all__ = ["COLUMNS", "ExportTotals", "export_values", "rows_for_project"]

COLUMNS: tuple[str, ...] = (
    "entry_id",
    "source_event_id",
    "at",
    "tenant_id",
    "project",
    "account",
    "debit_micro",
    "credit_micro",
    "description",
    "reverses_entry_id",
    "kind",
    "opened_by_event_id",
    "closed_by_event_id",
    "incident_id",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportTotals:
    """Row count and summed debits and credits of what an export wrote."""

    rows: int = 0
    debit_micro: int = 0
    credit_micro: int = 0

    def add(self, row: LedgerRow) -> ExportTotals:
        """Totals including one more row."""
        return ExportTotals(
            rows=self.rows + 1,
            debit_micro=self.debit_micro + row.debit_micro,
            credit_micro=self.credit_micro + row.credit_micro,
        )


def rows_for_project(
    rows: Iterable[LedgerRow], *, tenant_id: str, project: str, start: datetime, end: datetime
) -> Iterator[LedgerRow]:
    """Lazily keep one tenant project's rows with `at` in [start, end)."""
    for row in rows:
        if row.tenant_id == tenant_id and row.project == project and start <= row.at < end:
            yield row


def export_values(row: LedgerRow) -> list[Any]:
    """A row's values in column order, times as ISO 8601."""
    return [v.isoformat() if isinstance(v, datetime) else v for v in (getattr(row, c) for c in COLUMNS)]
