"""Streaming project exports from the ledger: a server-side cursor in bounded chunks, whatever the size.

The caller opens a REPEATABLE READ transaction, reads the totals (`export_totals`) and then streams
the rows (`export_chunks`) in the same snapshot, so the totals sent ahead of the body are exactly
those of the rows that follow. Postgres encodes CSV and JSON Lines itself (COPY TO STDOUT), streamed
through a bounded queue. Parquet needs its footer last: the CSV is spooled to a temporary file, read
back by Arrow in bounded blocks, written one row group per block to a second temporary file, which
is then streamed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal

import asyncpg
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from services.billing.adapters.export_writers import PARQUET_SCHEMA
from services.billing.domain.exports import ExportTotals

__all__ = [
    "MEDIA_TYPES",
    "ExportFormat",
    "ExportRequest",
    "export_chunks",
    "export_totals",
    "write_export_file",
]

ExportFormat = Literal["csv", "jsonl", "parquet"]
MEDIA_TYPES: dict[str, str] = {
    "csv": "text/csv",
    "jsonl": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
}
_FILE_PIECE = 1 << 20
_CSV_BLOCK = 2 << 20  # bytes of CSV per Arrow batch (one Parquet row group): bounds memory

# Postgres formats the rows (COPY), which is several times faster than decoding records in Python.
_ROWS = """
SELECT p.entry_id, e.source_event_id, to_char(p.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at,
       p.tenant_id, p.project, p.account, p.debit_micro, p.credit_micro, e.description, e.reverses_entry_id,
       e.kind, e.opened_by_event_id, e.closed_by_event_id, e.incident_id
FROM postings p JOIN journal_entries e ON e.entry_id = p.entry_id
WHERE p.tenant_id = $1 AND p.project = $2 AND p.at >= $3 AND p.at < $4
ORDER BY p.at, p.posting_id
"""
EXPORT_CSV = _ROWS
EXPORT_JSONL = f"""
SELECT json_build_object('entry_id', r.entry_id, 'source_event_id', r.source_event_id, 'at', r.at,
    'tenant_id', r.tenant_id, 'project', r.project, 'account', r.account, 'debit_micro', r.debit_micro,
    'credit_micro', r.credit_micro, 'description', r.description,
    'reverses_entry_id', r.reverses_entry_id, 'kind', r.kind, 'opened_by_event_id', r.opened_by_event_id,
    'closed_by_event_id', r.closed_by_event_id, 'incident_id', r.incident_id)::text
FROM ({_ROWS}) AS r
"""
EXPORT_TOTALS = """
SELECT count(*) AS rows, coalesce(sum(debit_micro), 0) AS debit, coalesce(sum(credit_micro), 0) AS credit
FROM postings WHERE tenant_id = $1 AND project = $2 AND at >= $3 AND at < $4
"""
_QUEUE_PIECES = 16  # COPY output waiting for a slow client: bounded, so memory is too


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


async def export_chunks(conn: asyncpg.Connection[Any], request: ExportRequest) -> AsyncIterator[bytes]:
    """The encoded export in pieces; `conn` must be inside the transaction that read the totals."""
    if request.format == "parquet":
        async for piece in _parquet(conn, request):
            yield piece
    elif request.format == "csv":
        async for piece in _copy(conn, EXPORT_CSV, request, header=True):
            yield piece
    else:  # one JSON object per line: CSV framing with quote and delimiter bytes JSON never contains
        async for piece in _copy(conn, EXPORT_JSONL, request, header=False, quote="\x01", delimiter="\x02"):
            yield piece


async def write_export_file(pool: asyncpg.Pool[Any], request: ExportRequest, path: Path) -> ExportTotals:
    """Write one export to `path` atomically (temporary name, then rename) and return its totals."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        totals = await export_totals(conn, request)
        with partial.open("wb") as out:
            async for piece in export_chunks(conn, request):
                out.write(piece)
    os.replace(partial, path)
    return totals


async def _copy(
    conn: asyncpg.Connection[Any], query: str, request: ExportRequest, *, header: bool, **csv: str
) -> AsyncIterator[bytes]:
    """COPY ... TO STDOUT as CSV, handed on through a bounded queue (back-pressure on Postgres)."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=_QUEUE_PIECES)

    async def put(data: bytes | bytearray | memoryview) -> None:
        # asyncpg may hand COPY data as a bytearray; a streamed response body must be bytes.
        await queue.put(bytes(data))

    async def produce() -> None:
        try:
            await conn.copy_from_query(query, *request.args(), output=put, format="csv", header=header, **csv)
        except BaseException:
            with contextlib.suppress(asyncio.QueueFull):  # the reader may be gone: never block on the way out
                queue.put_nowait(None)
            raise
        await queue.put(None)

    task = asyncio.create_task(produce())
    try:
        while (piece := await _next(queue, task)) is not None:
            yield piece
        await task  # surfaces a COPY error
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _next(queue: asyncio.Queue[bytes | None], task: asyncio.Task[None]) -> bytes | None:
    """The next piece; None at the end, or when the producer died without room to say so."""
    while True:
        try:
            return await asyncio.wait_for(queue.get(), timeout=1.0)
        except TimeoutError:
            if task.done() and queue.empty():
                return None


async def _parquet(conn: asyncpg.Connection[Any], request: ExportRequest) -> AsyncIterator[bytes]:
    """CSV from COPY spooled to disk, re-read in bounded blocks into Parquet row groups, then streamed."""
    with tempfile.TemporaryFile() as csv_spool, tempfile.TemporaryFile() as out:
        async for piece in _copy(conn, EXPORT_CSV, request, header=True):
            csv_spool.write(piece)
        await asyncio.to_thread(_csv_to_parquet, csv_spool, out)
        out.seek(0)
        while piece := out.read(_FILE_PIECE):
            yield piece


def _csv_to_parquet(source: IO[bytes], out: IO[bytes]) -> None:
    source.seek(0)
    reader = pacsv.open_csv(
        source,
        read_options=pacsv.ReadOptions(block_size=_CSV_BLOCK, use_threads=False),  # one block in memory
        convert_options=pacsv.ConvertOptions(
            column_types={f.name: f.type for f in PARQUET_SCHEMA},
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    with pq.ParquetWriter(out, PARQUET_SCHEMA) as writer:
        writer.write_table(PARQUET_SCHEMA.empty_table())
        for batch in reader:
            writer.write_batch(batch)
