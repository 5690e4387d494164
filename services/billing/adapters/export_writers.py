"""Streaming exports of ledger rows to CSV, JSON Lines and Parquet with totals that match the ledger.

Each writer consumes an iterator and holds at most one chunk (CSV/JSONL) or one row group (Parquet)
in memory, whatever the number of rows, and returns the totals of what it wrote.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from services.billing.domain.exports import COLUMNS, ExportTotals, export_values
from services.billing.domain.ledger import LedgerRow

__all__ = ["PARQUET_SCHEMA", "ByteSink", "write_csv", "write_jsonl", "write_parquet"]

_CHUNK_ROWS = 10_000
_PARQUET_SCHEMA = pa.schema(
    [
        ("entry_id", pa.string()),
        ("source_event_id", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("tenant_id", pa.string()),
        ("project", pa.string()),
        ("account", pa.string()),
        ("debit_micro", pa.int64()),
        ("credit_micro", pa.int64()),
        ("description", pa.string()),
        ("reverses_entry_id", pa.string()),
        ("kind", pa.string()),
        ("opened_by_event_id", pa.string()),
        ("closed_by_event_id", pa.string()),
        ("incident_id", pa.string()),
    ]
)

PARQUET_SCHEMA = _PARQUET_SCHEMA  # public name for writers that build row groups from columns


class ByteSink(Protocol):
    """Where an export goes: any binary file-like object."""

    def write(self, data: bytes, /) -> int: ...


def write_csv(rows: Iterable[LedgerRow], out: ByteSink) -> ExportTotals:
    """CSV with a header row; amounts are integer micro-units, times ISO 8601."""
    totals, buffer = ExportTotals(), io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        totals = totals.add(row)
        writer.writerow(["" if v is None else v for v in export_values(row)])
        if totals.rows % _CHUNK_ROWS == 0:
            _drain(buffer, out)
    _drain(buffer, out)
    return totals


def write_jsonl(rows: Iterable[LedgerRow], out: ByteSink) -> ExportTotals:
    """One JSON object per line; amounts are integer micro-units, times ISO 8601."""
    totals, buffer = ExportTotals(), io.StringIO()
    for row in rows:
        totals = totals.add(row)
        buffer.write(json.dumps(dict(zip(COLUMNS, export_values(row), strict=True))) + "\n")
        if totals.rows % _CHUNK_ROWS == 0:
            _drain(buffer, out)
    _drain(buffer, out)
    return totals


def write_parquet(rows: Iterable[LedgerRow], out: ByteSink, *, row_group_size: int = 65_536) -> ExportTotals:
    """Parquet written one row group at a time, so memory is bounded by `row_group_size`."""
    totals, batch = ExportTotals(), _empty_columns()
    with pq.ParquetWriter(out, _PARQUET_SCHEMA) as writer:
        for row in rows:
            totals = totals.add(row)
            for name in COLUMNS:
                batch[name].append(getattr(row, name))
            if len(batch["entry_id"]) >= row_group_size:
                writer.write_table(pa.Table.from_pydict(batch, schema=_PARQUET_SCHEMA))
                batch = _empty_columns()
        if batch["entry_id"] or totals.rows == 0:
            writer.write_table(pa.Table.from_pydict(batch, schema=_PARQUET_SCHEMA))
    return totals


def _empty_columns() -> dict[str, list[Any]]:
    return {name: [] for name in COLUMNS}


def _drain(buffer: io.StringIO, out: ByteSink) -> None:
    out.write(buffer.getvalue().encode("utf-8"))
    buffer.seek(0)
    buffer.truncate()
