"""The tenant-scoped reads the routes share: the app's state, and the samples a caller may see."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import Request

from libs.common.auth import Principal, tenant_filter
from libs.common.runtime import ServiceRuntime
from services.telemetry.adapters.live_store import LiveState
from services.telemetry.api.schemas import LatestSample
from services.telemetry.service.state import TelemetryState

__all__ = [
    "context",
    "latest",
    "samples_of",
    "taken_for",
    "visible_latest",
]


def context(request: Request) -> tuple[ServiceRuntime, TelemetryState, LiveState]:
    """The runtime, the shared state and the live store of the app serving this request."""
    runtime: ServiceRuntime = request.app.state.runtime
    state: TelemetryState = request.app.state.telemetry
    return runtime, state, state.live(runtime)


def latest(raw: dict[str, Any]) -> LatestSample:
    """A stored sample as the API shows it."""
    sample = LatestSample.model_validate(raw)
    return sample.model_copy(update={"fb_used_percent": sample.fb_used_pct})


def taken_for(rows: list[dict[str, Any]], tenant: str | None) -> list[dict[str, Any]]:
    """The samples taken while their GPU served ``tenant`` (None: all).

    A GPU just allocated to a tenant still shows, for up to a sample interval, the latest sample of
    whoever held it before (or of nobody): that sample is not the tenant's to see.
    """
    return rows if tenant is None else [r for r in rows if r.get("tenant_id") == tenant]


async def visible_latest(
    request: Request, caller: Principal, *, requested_tenant: str | None = None
) -> list[dict[str, Any]]:
    """Latest samples the caller may see: a tenant's allocated GPUs, or (admin) all or one tenant's."""
    _, state, live = context(request)
    tenant = tenant_filter(caller, requested_tenant)
    if tenant is None:
        return await live.all()
    return await samples_of(request, sorted(state.view.by_tenant.get(tenant, set())), tenant=tenant)


async def samples_of(request: Request, gpus: Iterable[str], *, tenant: str | None) -> list[dict[str, Any]]:
    """Latest samples of ``gpus`` that a caller scoped to ``tenant`` (None: admin) may see: of the GPUs
    allocated to it, the samples taken for it (``taken_for``)."""
    _, state, live = context(request)
    rows = await live.some(sorted(g for g in gpus if state.view.visible(g, tenant=tenant)))
    return taken_for(rows, tenant)
