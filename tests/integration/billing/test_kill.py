"""The billing process SIGKILLed in the middle of a burst of lifecycle events, then restarted."""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import SupportsInt, cast

import httpx

from libs.common.events import topics
from libs.devkit.broker import free_port
from tests.integration.billing.helpers import (
    ended,
    expected_micro,
    fetchval,
    host_exited,
    host_started,
    placed,
    started,
)
from tests.integration.bus_fixtures import publish
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually

T0 = datetime(2025, 4, 1, 0, 0, tzinfo=UTC)
WORKLOADS = 150
MINUTES = 120


def _start(iso: Isolation, port: int) -> subprocess.Popen[bytes]:
    env = iso.environ("billing", port=port, BILLING_ACCRUAL_INTERVAL_S="3600", LOG_LEVEL="WARNING")
    return subprocess.Popen([sys.executable, "-m", "services.billing"], env=env)


async def _count(iso: Isolation, sql: str) -> int:
    try:
        return int(cast(SupportsInt, await fetchval(iso, sql)))  # a count: int
    except Exception:  # the schema appears when the process has migrated
        return 0


async def test_billing_killed_mid_burst_and_restarted_ledger_equals_recomputed_usage(
    isolation: Isolation,
) -> None:
    burst, reports = [], []
    end = T0 + timedelta(minutes=MINUTES)
    for i in range(WORKLOADS):
        burst += [placed(f"k{i}", at=T0), started(f"k{i}", at=T0), ended(f"k{i}", at=end, ended_at=end)]
        reports += [host_started(f"k{i}", at=T0), host_exited(f"k{i}", at=end)]
    await publish(isolation, burst, topic=topics.SCHEDULER)
    await publish(isolation, reports, topic=topics.NODE_AGENT)
    port = free_port()
    first = _start(isolation, port)
    try:
        await eventually(
            lambda: _count(isolation, "SELECT count(*) FROM allocations WHERE status = 'closed'"),
            timeout=60,
            what="some charges posted",
        )
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        first.kill()
    closed_at_kill = await _count(isolation, "SELECT count(*) FROM allocations WHERE status = 'closed'")
    assert closed_at_kill < WORKLOADS, "the kill must land before the burst is done"

    second = _start(isolation, port)
    try:
        await eventually(
            lambda: _all_closed(isolation),
            timeout=90,
            interval=0.5,
            what="restarted service to finish the burst",
        )
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            recon = await eventually(lambda: _reconcile(client), timeout=30, what="reconciliation endpoint")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=20)
    assert recon.pop("credits") == {"equal": True, "decisions": 0, "credited_micro": 0, "problems": []}
    assert recon.pop("debit_micro") == recon.pop("credit_micro")  # the ledger balances
    assert recon == {
        "equal": True,
        "balanced": True,
        "differences": [],
        "missing_keys": [],
        "unexpected_keys": [],
        "hosts": {"equal": True, "placements_checked": WORKLOADS, "difference_micro": 0, "placements": []},
    }
    per_workload = expected_micro(units=8, seconds=[60] * MINUTES, micro_per_unit_hour=500_000)
    total = await fetchval(isolation, "SELECT sum(amount_micro) FROM journal_entries")
    assert total == WORKLOADS * per_workload
    assert await fetchval(isolation, "SELECT count(*) FROM journal_entries") == WORKLOADS * MINUTES


async def _all_closed(iso: Isolation) -> bool:
    closed = await _count(iso, "SELECT count(*) FROM allocations WHERE status = 'closed'")
    return closed == WORKLOADS and await _count(iso, "SELECT count(*) FROM host_facts") == 2 * WORKLOADS


async def _reconcile(client: httpx.AsyncClient) -> dict[str, object] | None:
    try:
        response = await client.get("/v1/admin/reconciliation", headers=ADMIN_HEADERS)
    except httpx.TransportError:
        return None
    return response.json() if response.status_code == 200 else None
