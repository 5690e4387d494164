"""What keeps a sample's time to Redis short: the agent spreads its node slices over the interval and
the aggregator writes a minute's rollups in small statements."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import libs.common.http  # noqa: F401  # before ingest: runtime and http import each other, http must come first
from libs.common.events.telemetry import NodeRollupV1
from services.telemetry.adapters.unit_of_work_fake import FakeTelemetryUnitOfWork
from services.telemetry.domain.rollup import GpuWindow
from services.telemetry.service import loops
from services.telemetry.service.agent.process import node_slices

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def test_node_slices_cover_every_host_once_in_order_at_evenly_spaced_offsets() -> None:
    hosts = [f"n{i:04d}" for i in range(1_250)]
    slices = node_slices(hosts, per_slice=125, spread_s=0.8)
    assert [h for _, part in slices for h in part] == hosts
    assert [len(part) for _, part in slices] == [125] * 10
    assert [offset for offset, _ in slices] == pytest.approx([n * 0.08 for n in range(10)])


def test_without_spread_or_with_one_slice_every_node_is_read_at_the_tick() -> None:
    assert node_slices(["a", "b", "c"], per_slice=2, spread_s=0.0) == [(0.0, ["a", "b"]), (0.0, ["c"])]
    assert node_slices(["only"], per_slice=125, spread_s=0.8) == [(0.0, ["only"])]
    assert node_slices([], per_slice=125, spread_s=0.8) == []


class _Conn:
    def __init__(self) -> None:
        self.statements: list[list[str]] = []  # the gpus of each upsert

    async def execute(self, sql: str, *args: Any) -> str:
        assert sql.lstrip().startswith("INSERT INTO rollups")
        self.statements.append(list(args[0]))
        return "INSERT 0"


def _window(gpu: int) -> GpuWindow:
    return GpuWindow(
        gpu=f"GPU-{gpu}",
        node=f"node-{gpu // 8}",
        model="H100",
        window_start=START,
        window_s=60.0,
        samples=60,
        workload_id=None,
        tenant_id=None,
        stats={"sm_util_pct": {"avg": 1.0, "max": 2.0, "p95": 2.0}},
    )


async def test_a_minutes_windows_are_upserted_in_chunks_with_one_node_rollup_per_node_in_one_commit() -> None:
    windows = [_window(g) for g in range(2_500)]
    conn = _Conn()
    uow = FakeTelemetryUnitOfWork(conn=conn)
    await loops.write_rollups(uow=uow, windows=windows)
    sizes = [len(s) for s in conn.statements]
    assert sizes == [loops.UPSERT_CHUNK, loops.UPSERT_CHUNK, 2_500 - 2 * loops.UPSERT_CHUNK]
    assert [g for s in conn.statements for g in s] == [w.gpu for w in windows]
    rollups = [e for e in uow.events if isinstance(e, NodeRollupV1)]
    assert len(rollups) == len(uow.events) == 2_500 // 8 + 1
    assert sorted(g.gpu for r in rollups for g in r.gpus) == sorted(w.gpu for w in windows)
