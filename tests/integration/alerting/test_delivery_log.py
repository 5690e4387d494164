"""Every attempt is in the delivery log, also one whose outcome the database could not take at once."""

from __future__ import annotations

import time
from typing import Any

import asyncpg
import httpx
import pytest

from services.alerting.domain.outgoing import IDEMPOTENCY_HEADER
from services.alerting.service.delivery_worker import DeliveryWorker
from tests.integration.alerting.helpers import alerts_in, paging
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually


async def _log(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/v1/deliveries", headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()
    return found


def _fail_recording(
    monkeypatch: pytest.MonkeyPatch, *, times: int = 1_000_000, for_s: float = 1e9
) -> list[float]:
    """Recordings of an outcome find the database out of connections: the first ``times`` of them, and
    only for ``for_s`` seconds after the first refusal."""
    real = DeliveryWorker._record_once
    failed: list[float] = []

    async def flaky(self: DeliveryWorker, *args: Any) -> None:
        now = time.monotonic()
        if len(failed) < times and (not failed or now < failed[0] + for_s):
            failed.append(now)
            raise asyncpg.TooManyConnectionsError("sorry, too many clients already")
        await real(self, *args)

    monkeypatch.setattr(DeliveryWorker, "_record_once", flaky)
    return failed


async def test_a_sent_notification_whose_outcome_the_database_refused_once_is_logged_and_not_sent_again(
    isolation: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = _fail_recording(monkeypatch, times=1)
    async with paging(isolation, node="blink-node", rule="MemHighBlink", delivery_lease_s=4.0) as (
        client,
        receiver,
    ):

        async def delivered() -> list[dict[str, Any]] | None:
            log = await _log(client)
            return log if log and all(n["status"] == "delivered" for n in log) else None

        log = await eventually(delivered, timeout=25, what="the page delivered and marked")

    assert len(failed) == 1
    assert len(alerts_in(receiver.accepted(), "firing")) == 1
    assert len(receiver.requests) == 1  # the outcome was recorded on the retry: nothing sent twice
    assert [[a["outcome"] for a in n["attempt_log"]] for n in log] == [["delivered"]]


async def test_an_attempt_whose_outcome_could_not_be_recorded_stays_in_the_log_beside_the_next(
    isolation: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Refused for longer than the worker waits (half the 2 s lease): the first outcome is lost.
    failed = _fail_recording(monkeypatch, for_s=1.8)
    async with paging(isolation, node="gone-node", rule="MemHighGone", delivery_lease_s=2.0) as (
        client,
        receiver,
    ):

        async def delivered() -> list[dict[str, Any]] | None:
            log = await _log(client)
            return log if log and all(n["status"] == "delivered" for n in log) else None

        log = await eventually(delivered, timeout=25, what="delivered after the lease")

    assert len(failed) >= 2  # the worker tried again before giving the first outcome up
    attempts = [a for n in log for a in n["attempt_log"]]
    assert [a["outcome"] for a in attempts] == ["sending", "delivered"]
    assert [a["attempt"] for a in attempts] == [1, 2]
    # Sent again after the lease, as the same notification: the receiver can tell it is a repeat.
    keys = {r.headers[IDEMPOTENCY_HEADER.lower()] for r in receiver.requests}
    assert len(receiver.requests) == 2
    assert len(keys) == 1
