"""The results and tasks routes on a small app: a memory object store, fake keys, a fake workload reader."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request

from libs.common.auth import Principal
from libs.common.auth.principal import authenticate
from libs.common.db import service_migrations
from libs.common.http.errors import Unauthorized, install_error_handlers
from libs.common.objectstore import ObjectStore, ObjectStoreError, open_store
from libs.common.objectstore.keys import log_chunk, log_end, output_file, output_manifest
from libs.common.runtime import ServiceRuntime
from services.scheduler.adapters.catalog_loader import load_catalog, load_gpu_models
from services.scheduler.api import results, tasks
from services.scheduler.domain.stored import StoredWorkload
from services.scheduler.service.context import SchedulerContext
from services.scheduler.service.tasks import EndWatch
from services.scheduler.settings import SchedulerSettings

T0_MS = 1_764_000_000_000
#: Keys the fake authentication knows: each is its tenant's name; ADMIN is the admin key.
ADMIN = "admin-key"


def workload(
    workload_id: str, *, tenant: str = "acme", state: str = "running", **facts: Any
) -> StoredWorkload:
    """A stored job in ``state``."""
    return StoredWorkload(
        workload_id=workload_id,
        tenant_id=tenant,
        kind="job",
        state=state,
        spec={},
        urgency=0.5,
        preemptible=False,
        tags={},
        submitted_at=datetime(2026, 12, 2, tzinfo=UTC),
        priority=0.5,
        pinned_priority=None,
        avoid_gpus=[],
        wait_reason=None,
        position=None,
        estimated_start=None,
        placement_id=None,
        ended_at=None,
        outcome=None,
        reason="",
        traceparent=None,
        **facts,
    )


@dataclass
class FakeWorkloads:
    """The workload reader's twin: rows by id, seen by their tenant (or any, for None)."""

    rows: dict[str, StoredWorkload] = field(default_factory=dict)

    def add(self, row: StoredWorkload) -> None:
        self.rows[row.workload_id] = row

    def end(self, workload_id: str, *, state: str = "completed", **facts: Any) -> None:
        self.rows[workload_id] = replace(self.rows[workload_id], state=state, **facts)

    async def workload(self, workload_id: str, *, tenant: str | None = None) -> StoredWorkload | None:
        row = self.rows.get(workload_id)
        return row if row is not None and tenant in (None, row.tenant_id) else None

    async def ended(self, workload_ids: Sequence[str]) -> set[str]:
        done = {"completed", "failed", "cancelled"}
        return {w for w in workload_ids if w in self.rows and self.rows[w].state in done}


async def fake_authenticate(request: Request) -> Principal:
    key = request.headers.get("x-api-key", "")
    if not key:
        raise Unauthorized("missing API key")
    if key == ADMIN:
        return Principal(key_id="admin", role="admin", tenant_id=None)
    return Principal(key_id=f"k-{key}", role="tenant", tenant_id=key)


def results_app(store: ObjectStore | None = None, rows: FakeWorkloads | None = None) -> FastAPI:
    """The results and tasks routers on an app that never connects to anything."""
    app = FastAPI()
    install_error_handlers(app)
    app.add_exception_handler(ObjectStoreError, results.on_store_error)
    app.include_router(results.router)
    app.include_router(tasks.router)
    fake = rows or FakeWorkloads()
    app.state.objects = store or open_store("memory://")
    app.state.end_watch = EndWatch(ended=fake.ended, poll_s=0.01)
    settings = SchedulerSettings()
    app.state.scheduler = SchedulerContext(
        settings=settings,
        runtime=ServiceRuntime(settings=settings, migrations=service_migrations("scheduler")),
        catalog=load_catalog(file=None, references={}),
        models=load_gpu_models(),
    )
    app.dependency_overrides[authenticate] = fake_authenticate
    app.dependency_overrides[results.workloads_of] = lambda: fake
    return app


async def put_chunk(store: ObjectStore, wl: str, pl: str, seq: int, text: str, *, at_ms: int) -> None:
    """One log chunk as the agent ships it."""
    await store.put(log_chunk(wl, pl, seq=seq, unix_ms=at_ms), text.encode())


async def put_end(store: ObjectStore, wl: str, pl: str) -> None:
    """A placement's log marked complete."""
    await store.put(log_end(wl, pl), json.dumps({"at": "2026-12-02T00:00:00Z", "bytes": 0}).encode())


async def put_outputs(store: ObjectStore, wl: str, pl: str, files: dict[str, bytes]) -> dict[str, Any]:
    """A placement's output files, then its manifest (last, as the agent writes it)."""
    for path, data in files.items():
        await store.put(output_file(wl, pl, path), data)
    manifest = {
        "workload_id": wl,
        "placement_id": pl,
        "at": "2026-12-02T00:00:00Z",
        "files": [{"path": p, "size": len(d)} for p, d in files.items()],
        "total_bytes": sum(len(d) for d in files.values()),
        "cap_bytes": 1 << 30,
        "dropped": [],
    }
    await store.put(output_manifest(wl, pl), json.dumps(manifest).encode())
    return manifest
