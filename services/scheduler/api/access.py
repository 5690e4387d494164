"""What every route reaches: the scheduler context hung on the app, the tenant a caller submits for."""

from __future__ import annotations

from fastapi import Request

from libs.common.auth import Principal, tenant_filter
from libs.common.http.errors import Unprocessable
from services.scheduler.service.context import SchedulerContext

__all__ = ["ctx_of", "submitting_tenant"]


def ctx_of(request: Request) -> SchedulerContext:
    """The scheduler context hung on the app."""
    ctx: SchedulerContext = request.app.state.scheduler
    return ctx


def submitting_tenant(caller: Principal, requested: str | None) -> str:
    """The tenant a new workload belongs to: the caller's own, or the one an admin names."""
    tenant = tenant_filter(caller, requested)
    if tenant is None:
        raise Unprocessable("an admin must say which tenant the workload is for", field="tenant_id")
    return tenant
