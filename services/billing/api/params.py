"""What the billing routers share: query parameters, the time window, the tenant, the settings they read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Protocol, runtime_checkable

from fastapi import Path, Query, Request
from pydantic import AfterValidator

from libs.common.auth import tenant_filter
from libs.common.auth.principal import Principal
from libs.common.http import PROJECT_NAME_RULE, Offset, Unprocessable, valid_project_name
from services.billing.domain.tags import UNTAGGED
from services.billing.service.loops import MeteringSettings

__all__ = [
    "ApiSettings",
    "End",
    "Limit",
    "Offset",
    "Project",
    "Start",
    "TenantQ",
    "api_settings",
    "one_tenant",
    "window",
]

_BEGINNING = datetime(1970, 1, 1, tzinfo=UTC)
_END_OF_TIME = datetime(9999, 1, 1, tzinfo=UTC)
Start = Annotated[datetime | None, Query(description="Inclusive start (ISO 8601 with offset).")]
End = Annotated[datetime | None, Query(description="Exclusive end (ISO 8601 with offset).")]
TenantQ = Annotated[str | None, Query(description="Admins: the tenant to act for; tenants: their own.")]
Limit = Annotated[int, Query(ge=1, le=10_000)]


def _project_name(name: str) -> str:
    if name != UNTAGGED and not valid_project_name(name):
        raise ValueError(f"a project name is {PROJECT_NAME_RULE} (or {UNTAGGED!r}, the untagged charges)")
    return name


Project = Annotated[
    str,
    Path(
        min_length=1,
        max_length=63,
        description=f"Project name: {PROJECT_NAME_RULE}; {UNTAGGED!r} holds the charges without one.",
    ),
    AfterValidator(_project_name),
]


@runtime_checkable
class ApiSettings(MeteringSettings, Protocol):
    """The settings the routers read (the service's settings have them)."""

    @property
    def spot_window_days(self) -> int: ...
    @property
    def usage_half_life_h(self) -> float: ...


def api_settings(request: Request) -> ApiSettings:
    """The service's settings, from the runtime the app was built with."""
    settings = request.app.state.runtime.settings
    assert isinstance(settings, ApiSettings)
    return settings


def window(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """Validated [start, end): timezone-aware, start before end."""
    for name, value in (("start", start), ("end", end)):
        if value is not None and value.tzinfo is None:
            raise Unprocessable(f"{name} must carry a UTC offset, e.g. 2025-03-01T00:00:00Z", field=name)
    lo, hi = start or _BEGINNING, end or _END_OF_TIME
    if hi <= lo:
        raise Unprocessable("end must be after start", field="end")
    return lo, hi


def one_tenant(caller: Principal, requested: str | None) -> str:
    """The single tenant an operation concerns; admins must name it."""
    tenant = tenant_filter(caller, requested)
    if tenant is None:
        raise Unprocessable("admins must name the tenant with tenant_id", field="tenant_id")
    return tenant
