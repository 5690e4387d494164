"""Small builders for scheduler unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.scheduler.domain.cluster import GpuView, MigPartition
from services.scheduler.domain.model import GangPolicy, GpuRequest, ResourceRequest, Workload, WorkloadKind
from services.scheduler.domain.schedule import QueueEntry

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def node(
    name: str,
    *,
    model: str = "A100",
    count: int = 8,
    units: float = 8.0,
    memory_gb: int = 80,
    labels: dict[str, str] | None = None,
    healthy: bool = True,
    ratio: int = 1,
    mig: tuple[tuple[str, float], ...] = (),
) -> list[GpuView]:
    """`count` identical GPUs on one node; `mig` lists (profile, units) partitions per GPU."""
    parts = tuple(MigPartition(f"mig-{i}", p, u) for i, (p, u) in enumerate(mig))
    return [
        GpuView(
            f"{name}-gpu{i}",
            name,
            model,
            memory_gb,
            units,
            healthy=healthy,
            labels=labels or {},
            partitions=parts,
            timeslice_ratio=ratio,
        )
        for i in range(count)
    ]


def workload(
    wid: str,
    resources: ResourceRequest | None = None,
    *,
    tenant: str = "acme",
    limit_min: int | None = 60,
    gang: GangPolicy = GangPolicy.SAME_NODE,
    constraints: dict[str, str] | None = None,
    preemptible: bool = False,
    age_s: int = 0,
) -> Workload:
    """A queued job with sensible defaults."""
    return Workload(
        id=wid,
        tenant=tenant,
        kind=WorkloadKind.JOB,
        image="pytorch:2.3",
        resources=resources or GpuRequest(model="A100", count=1),
        urgency=0.5,
        submitted_at=NOW - timedelta(seconds=age_s),
        preemptible=preemptible,
        time_limit=timedelta(minutes=limit_min) if limit_min else None,
        gang=gang,
        constraints=constraints or {},
    )


def entry(
    wid: str, resources: ResourceRequest | None = None, *, priority: float = 0.5, **kw: object
) -> QueueEntry:
    """A queue entry for a fresh workload."""
    return QueueEntry(workload=workload(wid, resources, **kw), priority=priority)  # type: ignore[arg-type]
