"""Streaming project exports from the ledger: a server-side cursor in bounded chunks, whatever the size.

The caller opens a REPEATABLE READ transaction, reads the totals (`export_totals`) and then streams
the rows (`export_chunks`) in the same snapshot, so the totals sent ahead of the body are exactly
those of the rows that follow. CSV and JSON Lines are encoded chunk by chunk; Parquet is written one
row group per chunk to a temporary file (Parquet's footer comes last), which is then streamed.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any, Literal

import asyncpg
import pyarrow as pa
import pyarrow.parquet as pq

from services.billing.exports import COLUMNS, PARQUET_SCHEMA, ExportTotals

__all__ = ["MEDIA_TYPES", "ExportFormat", "ExportRequest", "export_chunks", "export_totals"]

ExportFormat = Literal["csv", "jsonl", "parquet"]
MEDIA_TYPES: dict[str, str] = {
    "csv": "text/csv",
    "jsonl": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
}
CHUNK_ROWS = 50_000
_FILE_PIECE = 1 << 20

EXPORT_ROWS = """
SELECT p.entry_id, e.source_event_id, p.at, p.tenant_id, p.project, p.account, p.debit_micro, p.credit_micro,
       e.description, e.reverses_entry_id
FROM postings p JOIN journal_entries e ON e.entry_id = p.entry_id
WHERE p.tenant_id = $1 AND p.project = $2 AND p.at >= $3 AND p.at < $4
ORDER BY p.at, p.posting_id
"""
EXPORT_TOTALS = """
SELECT count(*) AS rows, coalesce(sum(debit_micro), 0) AS debit, coalesce(sum(credit_micro), 0) AS credit
FROM postings WHERE tenant_id = $1 AND project = $2 AND at >= $3 AND at < $4
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportRequest:
    """One tenant project's ledger rows with `at` in [start, end)."""

    tenant_id: str
    project: str
    start: datetime
    end: datetime
    format: ExportFormat

    def args(self) -> tuple[str, str, datetime, datetime]:
        """Query parameters."""
        return (self.tenant_id, self.project, self.start, self.end)


async def export_totals(conn: asyncpg.Connection[Any], request: ExportRequest) -> ExportTotals:
    """Row count and summed debits and credits of the export, straight from the ledger."""
    row = await conn.fetchrow(EXPORT_TOTALS, *request.args())
    assert row is not None
    return ExportTotals(rows=row["rows"], debit_micro=int(row["debit"]), credit_micro=int(row["credit"]))


async def export_chunks(
    conn: asyncpg.Connection[Any], request: ExportRequest, *, chunk_rows: int = CHUNK_ROWS
) -> AsyncIterator[bytes]:
    """The encoded export in pieces; `conn` must be inside a transaction (the cursor lives in it)."""
    if request.format == "parquet":
        async for piece in _parquet(conn, request, chunk_rows):
            yield piece
        return
    encode = _csv_chunk if request.format == "csv" else _jsonl_chunk
    if request.format == "csv":
        yield (",".join(COLUMNS) + "\n").encode()
    async for records in _batches(conn, request, chunk_rows):
        yield encode(records)


async def _batches(
    conn: asyncpg.Connection[Any], request: ExportRequest, chunk_rows: int
) -> AsyncIterator[list[asyncpg.Record]]:
    cursor = await conn.cursor(EXPORT_ROWS, *request.args())
    while records := await cursor.fetch(chunk_rows):
        yield records


def _csv_chunk(records: Sequence[asyncpg.Record]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(
        (r[0], r[1], r[2].isoformat(), r[3], r[4], r[5], r[6], r[7], r[8], r[9] or "") for r in records
    )
    return buffer.getvalue().encode()


def _jsonl_chunk(records: Sequence[asyncpg.Record]) -> bytes:
    lines = []
    for r in records:
        values = (r[0], r[1], r[2].isoformat(), r[3], r[4], r[5], r[6], r[7], r[8], r[9])
        lines.append(json.dumps(dict(zip(COLUMNS, values, strict=True))))
    return ("\n".join(lines) + "\n").encode()


async def _parquet(
    conn: asyncpg.Connection[Any], request: ExportRequest, chunk_rows: int
) -> AsyncIterator[bytes]:
    with tempfile.TemporaryFile() as spool:
        writer = pq.ParquetWriter(spool, PARQUET_SCHEMA)
        wrote = False
        async for records in _batches(conn, request, chunk_rows):
            table = _table(records)
            await asyncio.to_thread(writer.write_table, table)  # compression is CPU work off the loop
            wrote = True
        if not wrote:
            writer.write_table(PARQUET_SCHEMA.empty_table())
        writer.close()
        async for piece in _read_back(spool):
            yield piece


def _table(records: Sequence[asyncpg.Record]) -> pa.Table:
    columns = list(zip(*records, strict=True))
    return pa.Table.from_arrays(
        [pa.array(col, type=field.type) for col, field in zip(columns, PARQUET_SCHEMA, strict=True)],
        schema=PARQUET_SCHEMA,
    )


async def _read_back(spool: IO[bytes]) -> AsyncIterator[bytes]:
    spool.seek(0)
    while piece := spool.read(_FILE_PIECE):
        yield piece
