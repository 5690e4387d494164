"""Accepting a job array: every item validated, budget-checked and quota-checked, then one statement.

All or nothing: one bad item refuses the array (every bad item listed), and nothing is stored unless all
of it is. A client key makes the request idempotent: the same key and the same body are answered again
from what was kept, never inserted twice (the key's unique index fences a concurrent twin).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from libs.common.db.uow import OutboxRow
from libs.common.http.errors import Conflict
from libs.common.observability.tracing import current_traceparent
from services.scheduler.adapters.array_store import ArrayRows, ArrayStore
from services.scheduler.adapters.fleet_store import FleetStore
from services.scheduler.adapters.postgres import Conn
from services.scheduler.domain.arrays import check_size, item_demands, needs_fleet, parse_items, resolve_items
from services.scheduler.domain.creation import CreationSpec, run_json_of
from services.scheduler.domain.errors import ItemProblem
from services.scheduler.domain.rows import limits_of
from services.scheduler.domain.stored import ArrayContext, StoredArray
from services.scheduler.service.array_events import array_outbox, to_json
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.pass_inputs import fair_share_book
from services.scheduler.service.submission import check_quota, event_resources

__all__ = ["ArraySubmitted", "IdempotencyKeyReused", "submit_array"]


class IdempotencyKeyReused(Conflict):
    """The client key was used before for another body: the request is not a retry of that one."""

    code = "idempotency_key_reused"


@dataclass(frozen=True, slots=True)
class ArraySubmitted:
    """The array accepted now, or the one accepted before under the same key and body (``replayed``)."""

    array: StoredArray
    replayed: bool


async def submit_array(
    ctx: SchedulerContext, *, tenant: str, items: Sequence[Any], key: str | None, body_sha256: str
) -> ArraySubmitted:
    """Record every item as a queued workload of one array, with both events each, and wake the placer.

    Raises the domain's ValidationError (the item count) or ItemsInvalid (every bad item), Conflict (a
    project budget-stopped, a quota the array can never fit, the key reused for another body) or
    QuotaExhausted; nothing is stored then.
    """
    check_size(len(items))
    if key is not None:  # a retry is answered as first accepted, whatever the catalog says of it now
        async with ctx.pool_for_submissions.acquire() as conn:
            kept = await ArrayStore(conn).by_key(tenant=tenant, key=key)
        if kept is not None:
            return _replayed(kept, body_sha256)
    # Before a connection is held, and off the event loop (a 10,000-item array is half a second of
    # CPU that the placer and the consumers would otherwise wait for).
    parsed = await asyncio.to_thread(parse_items, items, catalog=ctx.catalog)
    now = datetime.now(UTC)
    async with ctx.pool_for_submissions.acquire() as conn:
        specs = resolve_items(parsed, models=ctx.models, in_fleet=await _fleet_models(ctx, conn, parsed))
        store = ArrayStore(conn)
        projects = sorted({s.tags["project"] for s in specs if "project" in s.tags})
        info = await store.context(tenant=tenant, projects=projects, month=now.strftime("%Y-%m"), key=key)
        if info.existing is not None:
            return _replayed(info.existing, body_sha256)
        _refuse_stopped(specs, info.stops)
        if info.quota is not None:
            limits = limits_of(info.quota)
            for index, demand in item_demands(specs):
                await check_quota(ctx, tenant=tenant, demand=demand, limits=limits, field=f"items.{index}")
        array = _array(ctx, tenant=tenant, specs=specs, info=info, now=now, key=key, digest=body_sha256)
        traceparent = current_traceparent()
        rows, outbox = _rows(ctx, array=array, specs=specs, traceparent=traceparent)
        if not await store.insert(array=array, rows=rows, traceparent=traceparent, outbox=outbox):
            twin = await store.by_key(tenant=tenant, key=key or "")
            assert twin is not None  # the key conflicted, so its row was committed
            return _replayed(twin, body_sha256)
    ctx.wake.set()
    return ArraySubmitted(array=array, replayed=False)


async def _fleet_models(ctx: SchedulerContext, conn: Conn, parsed: Sequence[Any]) -> set[str]:
    """The fleet's models, read only when an item names a model the catalog lacks."""
    return await FleetStore(conn).models() if needs_fleet(parsed, models=ctx.models) else set()


def _replayed(kept: StoredArray, body_sha256: str) -> ArraySubmitted:
    if kept.body_sha256 != body_sha256:
        raise IdempotencyKeyReused(
            f"Idempotency-Key {kept.client_key!r} was used for another request body (array "
            f"{kept.array_id}); a retry sends the same body, a new request a new key",
            field="Idempotency-Key",
            details={"array_id": kept.array_id},
        )
    return ArraySubmitted(array=kept, replayed=True)


def _refuse_stopped(specs: Sequence[CreationSpec], stops: dict[str, str]) -> None:
    """Conflict naming every item whose project is budget-stopped, as a single request's would."""
    if not stops:
        return
    problems = [
        ItemProblem(index=i, field="tags.project", message=f"new work refused: {stops[s.tags['project']]}")
        for i, s in enumerate(specs)
        if s.tags.get("project") in stops
    ]
    first = problems[0]
    raise Conflict(
        f"{first.path}: {first.message}",
        field=first.path,
        details=[p.detail() for p in problems],
    )


def _array(
    ctx: SchedulerContext,
    *,
    tenant: str,
    specs: Sequence[CreationSpec],
    info: ArrayContext,
    now: datetime,
    key: str | None,
    digest: str,
) -> StoredArray:
    """The array's answer: fresh ids, each item's priority, the queue position of the first."""
    book = fair_share_book(info.fair_share, ctx, now=now)
    by_urgency = {u: book.explain(tenant=tenant, urgency=u).priority for u in {s.urgency for s in specs}}
    priorities = [by_urgency[s.urgency] for s in specs]
    random = os.urandom(8 * (len(specs) + 1)).hex()  # one read of the system's randomness for every id
    ids = [f"wl-{random[16 * i : 16 * i + 16]}" for i in range(1, len(specs) + 1)]
    return StoredArray(
        array_id=f"arr-{random[:16]}",
        tenant_id=tenant,
        client_key=key,
        body_sha256=digest,
        workload_ids=ids,
        priorities=priorities,
        first_position=info.waiting + 1,
        submitted_at=now,
    )


def _rows(
    ctx: SchedulerContext, *, array: StoredArray, specs: Sequence[CreationSpec], traceparent: str | None
) -> tuple[ArrayRows, list[OutboxRow]]:
    """The workload rows and the outbox rows (submitted, then queued, for each item in order)."""
    dumps = [s.model_dump(mode="json") for s in specs]
    tags = [to_json(s.tags) for s in specs]
    outbox = array_outbox(
        array,
        specs=specs,
        tags=tags,
        resources=[event_resources(d["resources"]) for d in dumps],
        source=ctx.settings.service_name,
        traceparent=traceparent,
        time=array.submitted_at,
    )
    rows = ArrayRows(
        kinds=[s.kind.value for s in specs],
        specs=[to_json(d) for d in dumps],
        urgencies=[s.urgency for s in specs],
        preemptible=[s.preemptible for s in specs],
        tags=tags,
        run_specs=[to_json(run_json_of(d, catalog=ctx.catalog)) for d in dumps],
    )
    return rows, outbox
