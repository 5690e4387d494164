"""Colliding admin prices answer 409 naming the collision, and change nothing (they were a 500)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from services.billing.app import create_app
from services.billing.settings import BillingSettings
from tests.integration.support import ADMIN_HEADERS, Isolation, running


def _price(price_id: str, *, at: datetime, micro: int) -> dict[str, Any]:
    return {
        "price_id": price_id,
        "gpu_model": "H100-80GB-SXM",
        "pricing_class": "on_demand",
        "basis": "gpu_hour",
        "micro_per_hour": micro,
        "effective_from": at.isoformat(),
    }


async def test_a_second_price_for_the_same_resource_at_the_same_instant_is_a_409_and_changes_nothing(
    isolation: Isolation,
) -> None:
    settings = isolation.settings(BillingSettings, "billing", accrual_interval_s=3600)
    at = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    async with running(create_app(settings)) as client:
        first = await client.post(
            "/v1/admin/prices", json=_price("h100-v9", at=at, micro=9), headers=ADMIN_HEADERS
        )
        assert first.status_code == 201, first.text
        before = (await client.get("/v1/prices", headers=ADMIN_HEADERS)).json()

        again = await client.post(
            "/v1/admin/prices", json=_price("h100-v10", at=at, micro=10), headers=ADMIN_HEADERS
        )

        assert again.status_code == 409, again.text
        error = again.json()["error"]
        assert error["field"] == "effective_from"
        assert "H100-80GB-SXM" in error["message"]
        assert "h100-v10" in error["message"]
        assert (await client.get("/v1/prices", headers=ADMIN_HEADERS)).json() == before
