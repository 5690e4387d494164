"""Accepting a validated creation request: budget stop, quota pre-check, then one unit of work."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

from libs.common.db.pool import create_pool
from libs.common.db.uow import outbox_row
from libs.common.events.scheduler import WorkloadQueuedV1, WorkloadSubmittedV1
from libs.common.http.errors import ApiError, Conflict
from libs.common.observability.tracing import current_traceparent
from libs.common.runtime import BackgroundTask, ServiceRuntime
from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.postgres import Conn
from services.scheduler.adapters.quota_store import RebuildNeeded
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.domain.creation import CreationSpec, run_of
from services.scheduler.domain.gpu_models import requested_model
from services.scheduler.domain.quota import DIMENSIONS, QuotaLimits, QuotaUsage, check, spec_demand
from services.scheduler.domain.rows import limits_of
from services.scheduler.domain.stored import StoredWorkload
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.pass_inputs import fair_share_book

__all__ = [
    "QuotaExhausted",
    "check_quota",
    "event_resources",
    "hold_submission_pool",
    "resources_of",
    "submit",
]

_DIM_NAMES = {"gpus": "GPUs", "units_milli": "compute units (milli)", "workloads": "concurrent workloads"}


class QuotaExhausted(ApiError):
    """The tenant's quota is in use now; retry when something finishes."""

    status, code = 429, "quota_exhausted"


def _describe(dim: str, limits: QuotaLimits, usage: QuotaUsage, demand: QuotaUsage) -> str:
    limit, used, asked = getattr(limits, dim), getattr(usage, dim), getattr(demand, dim)
    return f"{_DIM_NAMES[dim]}: limit {limit}, in use {used}, asked {asked}"


async def check_quota(
    ctx: SchedulerContext, *, tenant: str, demand: QuotaUsage, limits: QuotaLimits, field: str = "resources"
) -> None:
    """Conflict when ``demand`` can never fit the tenant's limits, QuotaExhausted when it does not fit now."""
    never = check(limits=limits, usage=QuotaUsage(), demand=demand)
    if never:
        details = {d: {"limit": getattr(limits, d), "asked": getattr(demand, d)} for d in never}
        raise Conflict(
            f"request exceeds tenant {tenant!r} quota: {_describe(never[0], limits, QuotaUsage(), demand)}",
            field=field,
            details=details,
        )
    try:
        usage = await ctx.quotas.usage(tenant=tenant) if await ctx.quotas.intact() else QuotaUsage()
    except RebuildNeeded:
        usage = QuotaUsage()
    now_over = check(limits=limits, usage=usage, demand=demand)
    if now_over:
        details = {
            d: {"limit": getattr(limits, d), "in_use": getattr(usage, d), "asked": getattr(demand, d)}
            for d in DIMENSIONS
            if d in now_over
        }
        raise QuotaExhausted(
            f"quota exhausted for tenant {tenant!r}: {_describe(now_over[0], limits, usage, demand)}",
            field=f"quota.{now_over[0]}",
            details=details,
        )


def resources_of(spec: CreationSpec) -> dict[str, str | int]:
    """The request's resources as WorkloadSubmittedV1 carries them."""
    return event_resources(spec.resources.model_dump(mode="json"))


def event_resources(dumped: dict[str, Any]) -> dict[str, str | int]:
    """Resources dumped as JSON, as WorkloadSubmittedV1 carries them: no nulls, numbers other than
    integers as text."""
    return {k: v if isinstance(v, (str, int)) else str(v) for k, v in dumped.items() if v is not None}


async def _with_known_model(ctx: SchedulerContext, conn: Conn, spec: CreationSpec) -> CreationSpec:
    """The spec asking for the catalog's name of its model; the fleet is read only for a name the
    catalog lacks. Raises the domain's ValidationError for a model nothing could ever place on."""
    asked = requested_model(spec)
    if asked is None or ctx.models.canonical(asked) is not None:
        return ctx.models.resolve(spec)
    return ctx.models.resolve(spec, in_fleet=await FleetStore(conn).models())


async def submit(ctx: SchedulerContext, *, tenant: str, spec: CreationSpec) -> StoredWorkload:
    """Record a workload as submitted and queued, with both events, and wake the placer.

    Two round trips on one connection: a read of everything the checks and the priority need, then one
    statement that inserts the workload and its two outbox rows and notifies placer and relay at commit.
    """
    now = datetime.now(UTC)
    project = spec.tags.get("project")
    async with ctx.pool_for_submissions.acquire() as conn:
        spec = await _with_known_model(ctx, conn, spec)
        store = WorkloadStore(conn)
        info = await store.submit_context(tenant=tenant, project=project, month=now.strftime("%Y-%m"))
        if project is not None and info.stop is not None:
            raise Conflict(f"new work refused: {info.stop}", field="tags.project")
        if info.quota is not None:
            await check_quota(ctx, tenant=tenant, demand=spec_demand(spec), limits=limits_of(info.quota))
        wid = f"wl-{uuid.uuid4().hex[:16]}"
        prio = (
            fair_share_book(info.fair_share, ctx, now=now)
            .explain(tenant=tenant, urgency=spec.urgency)
            .priority
        )
        row = {
            "workload_id": wid,
            "tenant_id": tenant,
            "kind": spec.kind.value,
            "spec": spec.model_dump(mode="json"),
            "urgency": spec.urgency,
            "preemptible": spec.preemptible,
            "tags": spec.tags,
            "submitted_at": now,
            "priority": prio,
            "traceparent": current_traceparent(),
            # Resolved now: a catalog changed later does not move what an accepted workload runs.
            "run_spec": run_of(spec, catalog=ctx.catalog).model_dump(mode="json"),
        }
        submitted = WorkloadSubmittedV1(
            workload_id=wid,
            tenant_id=tenant,
            kind=spec.kind.value,
            urgency=spec.urgency,
            preemptible=spec.preemptible,
            pricing_class="spot" if spec.preemptible else "on_demand",
            tags=spec.tags,
            resources=resources_of(spec),
        )
        # Counted in the same snapshot as the checks, plus this one (the old count ran after the insert).
        position = info.waiting + 1
        queued = WorkloadQueuedV1(workload_id=wid, tenant_id=tenant, position=position, priority=prio)
        source = ctx.settings.service_name
        outbox = [outbox_row(e, source=source, tenant=tenant) for e in (submitted, queued)]
        created = await store.submit(row=row, outbox=outbox)
    ctx.wake.set()
    return created


def hold_submission_pool(ctx: SchedulerContext) -> BackgroundTask:
    """A background task that opens the submissions' own pool, serves it until stop, then closes it.

    Submissions run two plain statements (no LISTEN, SET, advisory lock or open cursor), so the pool is
    stateless: no reset query on every release.
    """

    async def hold(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        s = ctx.settings
        pool = await create_pool(
            dsn=s.service_database_url,
            schema=s.pg_schema,
            max_size=s.db_pool_max,
            stateless=True,
            pooled=s.pooled,
        )
        ctx.submit_pool = pool
        try:
            await stop.wait()
        finally:
            ctx.submit_pool = None
            await pool.close()

    return hold
