import csv
import io
import json
from typing import Any

import pyarrow.parquet as pq
import pytest

from services.billing.adapters.export_queries import ExportRequest, export_chunks
from services.billing.adapters.export_writers import write_csv, write_jsonl, write_parquet
from services.billing.domain.exports import COLUMNS, rows_for_project
from services.billing.domain.ledger import LedgerRow, ledger_rows, post_charge, reverse
from services.billing.domain.rating import rate
from tests.unit.billing.factories import T0, allocation, flat_prices, minutes


def _rows(n_minutes: int = 50) -> list[LedgerRow]:
    prices = flat_prices(micro_per_hour=3_456_789)  # odd price so amounts are not round
    lines = rate(allocation=allocation(), rated_until=None, now=T0 + minutes(n_minutes), prices=prices).lines
    entries = [post_charge(line) for line in lines]
    entries.append(reverse(entries[0], reason="goodwill", at=T0 + minutes(n_minutes)))
    return list(ledger_rows(entries))


def test_csv_round_trip_totals_equal_the_ledger() -> None:
    rows, out = _rows(), io.BytesIO()

    totals = write_csv(iter(rows), out)

    read = list(csv.DictReader(io.StringIO(out.getvalue().decode())))
    assert len(read) == totals.rows == len(rows)
    assert sum(int(r["debit_micro"]) for r in read) == totals.debit_micro == sum(r.debit_micro for r in rows)
    assert read[-1]["reverses_entry_id"] == rows[-1].reverses_entry_id


def test_jsonl_round_trip_totals_equal_the_ledger() -> None:
    rows, out = _rows(), io.BytesIO()

    totals = write_jsonl(iter(rows), out)

    read = [json.loads(line) for line in out.getvalue().splitlines()]
    assert list(read[0]) == list(COLUMNS)
    assert sum(r["credit_micro"] for r in read) == totals.credit_micro == sum(r.credit_micro for r in rows)


@pytest.mark.parametrize("row_group_size", [7, 1_000])
def test_parquet_round_trip_in_bounded_row_groups_totals_equal_the_ledger(row_group_size: int) -> None:
    rows, out = _rows(), io.BytesIO()

    totals = write_parquet(iter(rows), out, row_group_size=row_group_size)

    parquet = pq.ParquetFile(io.BytesIO(out.getvalue()))
    table = parquet.read()
    assert table.num_rows == totals.rows == len(rows)
    assert (
        sum(table.column("debit_micro").to_pylist()) == totals.debit_micro == sum(r.debit_micro for r in rows)
    )
    assert (
        max(parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)) <= row_group_size
    )
    assert table.column("at").to_pylist()[0] == rows[0].at


def test_empty_export_still_writes_a_readable_file_with_zero_totals() -> None:
    out = io.BytesIO()

    totals = write_parquet(iter([]), out)

    assert totals.rows == totals.debit_micro == 0
    assert pq.read_table(io.BytesIO(out.getvalue())).num_rows == 0


def test_project_filter_keeps_only_that_project_within_the_date_range() -> None:
    rows = _rows(10)

    kept = list(rows_for_project(rows, tenant_id="acme", project="vision", start=T0, end=T0 + minutes(5)))

    assert kept
    assert all(T0 <= r.at < T0 + minutes(5) for r in kept)
    assert not list(rows_for_project(rows, tenant_id="acme", project="other", start=T0, end=T0 + minutes(60)))


class _CopyingConn:
    """Stands in for asyncpg: COPY output arrives as bytearrays, as asyncpg sometimes hands it."""

    async def copy_from_query(self, query: str, *args: object, output: Any, **options: object) -> None:
        for piece in (bytearray(b"entry_id,at\n"), bytearray(b"e1,2025-03-01\n")):
            await output(piece)


async def test_streamed_export_pieces_are_bytes_even_when_copy_hands_over_bytearrays() -> None:
    request = ExportRequest(tenant_id="t", project="p", start=T0, end=T0 + minutes(1), format="csv")

    pieces = [p async for p in export_chunks(_CopyingConn(), request)]

    assert [type(p) for p in pieces] == [bytes, bytes]
    assert b"".join(pieces) == b"entry_id,at\ne1,2025-03-01\n"
