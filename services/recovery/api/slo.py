"""The recovery SLO route: detection to running again over a window, overall and per fault class."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Request

from libs.common.auth import Caller, tenant_filter
from libs.common.http import Unprocessable
from services.recovery.adapters.incident_queries import IncidentQueries
from services.recovery.api.catalog import known_fault_type
from services.recovery.api.schemas import SloOut
from services.recovery.domain.slo import by_fault_type, summarize

__all__ = ["parse_period", "router"]

router = APIRouter(tags=["recovery"])

_PERIOD = re.compile(r"^(\d{1,6})([mhd])$")
_UNIT = {"m": "minutes", "h": "hours", "d": "days"}
MAX_PERIOD = timedelta(days=366)


def parse_period(text: str) -> timedelta:
    """'90m', '24h', '7d' as a duration; Unprocessable naming ``period`` otherwise."""
    match = _PERIOD.match(text)
    if match is None:
        raise Unprocessable("period must look like 30m, 24h or 7d", field="period")
    period = timedelta(**{_UNIT[match.group(2)]: int(match.group(1))})
    if not timedelta(0) < period <= MAX_PERIOD:
        raise Unprocessable("period must be between 1 minute and 366 days", field="period")
    return period


@router.get("/v1/stats/slo")
async def slo_stats(
    request: Request, caller: Caller, period: str = "24h", fault_type: str | None = None
) -> SloOut:
    as_of = datetime.now(UTC)
    since = as_of - parse_period(period)
    fault_type = known_fault_type(request, fault_type)
    async with request.app.state.runtime.pool.acquire() as conn:
        incidents = await IncidentQueries(conn).for_slo(
            since=since, fault_type=fault_type, tenant=tenant_filter(caller)
        )
    return SloOut(
        since=since,
        as_of=as_of,
        period=period,
        fault_type=fault_type,
        overall=summarize(incidents, as_of=as_of),
        by_fault_type=dict(by_fault_type(incidents, as_of=as_of)),
    )
