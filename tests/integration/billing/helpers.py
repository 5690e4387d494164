"""Builders and probes shared by the billing integration tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import SupportsInt, cast

import asyncpg

from libs.common.events import Envelope, envelop
from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, WorkloadEndedV1, WorkloadPlacedV1, WorkloadRunningV1
from tests.integration.support import Isolation


def placed(
    placement_id: str,
    *,
    at: datetime,
    tenant: str = "acme",
    project: str = "vision",
    model: str = "A100-80GB",
    units: str = "8",
    gpus: int = 1,
    profile: str | None = None,
    pricing_class: str = "on_demand",
    kind: str = "job",
    tags: dict[str, str] | None = None,
    workload: str | None = None,
) -> Envelope:
    items = [
        AllocationItem(
            gpu_uuid=f"GPU-{placement_id}-{i}",
            partition_id="p0" if profile else None,
            units=Decimal(units),
            model=model,
            profile=profile,
        )
        for i in range(gpus)
    ]
    payload = WorkloadPlacedV1(
        workload_id=workload or f"wl-{placement_id}",
        tenant_id=tenant,
        placement_id=placement_id,
        node="node-1",
        allocations=items,
        kind=kind,  # type: ignore[arg-type]
        pricing_class=pricing_class,  # type: ignore[arg-type]
        tags={"project": project, **(tags or {})},
    )
    return envelop(payload, source="test", tenant=tenant, time=at)


def started(
    placement_id: str,
    *,
    at: datetime,
    tenant: str = "acme",
    sent: datetime | None = None,
    workload: str | None = None,
) -> Envelope:
    """The scheduler's WorkloadRunningV1: the host started it at `at` (sent then, unless `sent`)."""
    payload = WorkloadRunningV1(
        workload_id=workload or f"wl-{placement_id}",
        tenant_id=tenant,
        placement_id=placement_id,
        node="node-1",
        started_at=at,
    )
    return envelop(payload, source="test", tenant=tenant, time=sent or at)


def ended(
    placement_id: str,
    *,
    at: datetime,
    tenant: str = "acme",
    outcome: str = "completed",
    ended_at: datetime | None = None,
    workload: str | None = None,
) -> Envelope:
    """The scheduler's WorkloadEndedV1, sent at `at`; `ended_at` None is an older scheduler's event (no
    end time of its own: billing takes the envelope's)."""
    payload = WorkloadEndedV1(
        workload_id=workload or f"wl-{placement_id}",
        tenant_id=tenant,
        placement_id=placement_id,
        outcome=outcome,  # type: ignore[arg-type]
        ended_at=ended_at,
    )
    return envelop(payload, source="test", tenant=tenant, time=at)


def host_started(
    placement_id: str, *, at: datetime, tenant: str = "acme", workload: str | None = None
) -> Envelope:
    """The node agent's own report that the host started the placement at `at`."""
    payload = WorkloadStartedV1(
        workload_id=workload or f"wl-{placement_id}",
        tenant_id=tenant,
        placement_id=placement_id,
        node="node-1",
        at=at,
    )
    return envelop(payload, source="/gpucloud/node-agent", time=at)


def host_exited(
    placement_id: str, *, at: datetime, tenant: str = "acme", outcome: str = "completed"
) -> Envelope:
    """The node agent's own report that the placement's process ended at `at`."""
    payload = WorkloadExitedV1(
        workload_id=f"wl-{placement_id}",
        tenant_id=tenant,
        placement_id=placement_id,
        node="node-1",
        outcome=outcome,  # type: ignore[arg-type]
        at=at,
    )
    return envelop(payload, source="/gpucloud/node-agent", time=at)


def expected_micro(*, units: int, seconds: Sequence[int], micro_per_unit_hour: int) -> int:
    """The documented rule, computed independently: each grid cell rounded half-even once."""
    return sum(round(Fraction(units * s, 3600) * micro_per_unit_hour) for s in seconds)


async def fetchval(iso: Isolation, sql: str, *args: object) -> object:
    conn = await asyncpg.connect(
        iso.infra.database_url, server_settings={"search_path": iso.schema("billing")}
    )
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def ledger_total(iso: Isolation, tenant: str, project: str) -> int:
    value = await fetchval(
        iso,
        "SELECT coalesce(sum(amount_micro), 0) FROM journal_entries WHERE tenant_id = $1 AND project = $2",
        tenant,
        project,
    )
    return int(cast(SupportsInt, value))  # a numeric column: Decimal or int
