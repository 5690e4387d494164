"""The delivery worker's decision for one attempt, given what the (fake) notifier answered: no database.

The worker's loop claims and records through Postgres (DeliveryStore on a connection), so these tests
drive one attempt (`_deliver`) and capture what it would record instead of writing it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from libs.common.runtime import ServiceRuntime
from services.alerting.adapters.config_store import Receiver
from services.alerting.adapters.delivery_store import Claimed
from services.alerting.adapters.receiver_client_fake import FakeReceiverClient, Reply, Unreachable
from services.alerting.domain.grouping import Notification
from services.alerting.domain.retry import DeadLetter, Delivered, Retry
from services.alerting.domain.signing import verify
from services.alerting.service.delivery_worker import Attempted, DeliveryWorker
from tests.unit.alerting.builders import alert

URL = "http://oncall.test/hook"
SECRET = "unit-signing-secret"
RECEIVERS = {
    "oncall": Receiver(
        name="oncall", kind="webhook", url=URL, secret=SECRET, routing_key=None, created_at=datetime.now(UTC)
    )
}


@dataclass(frozen=True, slots=True)
class Settings:
    external_url: str = "http://alerting.test"
    delivery_poll_s: float = 1.0
    delivery_handover_s: float = 0.25
    delivery_timeout_s: float = 1.0
    delivery_concurrency: int = 1
    delivery_lease_s: float = 30.0
    retry_base_s: float = 1.0
    retry_cap_s: float = 60.0
    retry_max_attempts: int = 5
    retry_max_age_s: float = 3600.0


@dataclass(frozen=True, slots=True)
class Recorded:
    attempt: int
    status: int | None
    error: str | None
    decision: Retry | DeadLetter | Delivered


class CapturingWorker(DeliveryWorker):
    """The real worker, with `_record` (the only Postgres write of an attempt) captured."""

    def __init__(self) -> None:
        super().__init__(settings=Settings(), rng=random.Random(7))
        self.recorded: list[Recorded] = []

    async def _record(self, runtime: Any, done: Attempted) -> None:
        self.recorded.append(
            Recorded(attempt=done.attempt, status=done.status, error=done.error, decision=done.decision)
        )


def _claimed(*, receiver: str = "oncall", attempts: int = 0) -> Claimed:
    notification = Notification(
        id="n-42",
        receiver=receiver,
        group_key='{}:{alertname="GpuMemoryHigh"}',
        group_labels={"alertname": "GpuMemoryHigh"},
        alerts=(alert(),),
        created_at=datetime.now(UTC),
    )
    return Claimed(
        notification=notification, receiver=receiver, attempts=attempts, first_attempt_at=datetime.now(UTC)
    )


async def _attempt(fake: FakeReceiverClient, claimed: Claimed) -> Recorded:
    worker = CapturingWorker()
    await worker._deliver(cast(ServiceRuntime, None), fake, claimed, RECEIVERS)
    [recorded] = worker.recorded
    return recorded


async def test_a_2xx_marks_the_notification_delivered_after_one_signed_request() -> None:
    fake = FakeReceiverClient()

    recorded = await _attempt(fake, _claimed())

    assert recorded == Recorded(attempt=1, status=200, error=None, decision=Delivered())
    [request] = fake.received(URL)
    assert request.headers["Idempotency-Key"] == "n-42"
    assert json.loads(request.body)["alerts"][0]["labels"]["alertname"] == "GpuMemoryHigh"
    stamp = int(request.headers["X-GpuCloud-Timestamp"])
    assert verify(secret=SECRET.encode(), body=request.body, headers=request.headers, now=stamp)


async def test_a_429_is_retried_no_sooner_than_its_retry_after_asks() -> None:
    fake = FakeReceiverClient()
    fake.script(URL, Reply(status=429, headers={"Retry-After": "120"}, body="slow down"))
    before = datetime.now(UTC)

    recorded = await _attempt(fake, _claimed(attempts=2))

    assert (recorded.attempt, recorded.status, recorded.error) == (3, 429, "HTTP 429: slow down")
    assert isinstance(recorded.decision, Retry)
    assert recorded.decision.at >= before + timedelta(seconds=120)


async def test_an_unreachable_receiver_is_retried_and_the_connection_error_is_kept() -> None:
    fake = FakeReceiverClient(default=Unreachable())

    recorded = await _attempt(fake, _claimed())

    assert (recorded.status, recorded.error) == (None, "ConnectError: All connection attempts failed")
    assert isinstance(recorded.decision, Retry)
    assert fake.received(URL) == []


async def test_a_400_is_dead_lettered_at_once_because_the_request_itself_is_wrong() -> None:
    fake = FakeReceiverClient(default=Reply(status=400, body="bad payload"))

    recorded = await _attempt(fake, _claimed())

    assert recorded.error == "HTTP 400: bad payload"
    assert recorded.decision == DeadLetter(reason="HTTP 400 is not retryable")


async def test_the_last_allowed_attempt_that_fails_is_dead_lettered() -> None:
    fake = FakeReceiverClient(default=Reply(status=500, body="boom"))

    recorded = await _attempt(fake, _claimed(attempts=Settings().retry_max_attempts - 1))

    assert recorded.decision == DeadLetter(reason="gave up after 5 attempts (last: 500)")


async def test_a_receiver_not_configured_yet_makes_the_notification_wait_without_a_request() -> None:
    fake = FakeReceiverClient()

    recorded = await _attempt(fake, _claimed(receiver="default"))

    assert recorded.error == "receiver 'default' is not configured (create it: POST /v1/receivers)"
    assert isinstance(recorded.decision, Retry)
    assert fake.requests == []


async def test_a_receiver_still_missing_at_the_last_allowed_attempt_is_dead_lettered_saying_so() -> None:
    fake = FakeReceiverClient()

    recorded = await _attempt(fake, _claimed(receiver="deleted", attempts=Settings().retry_max_attempts - 1))

    assert recorded.decision == DeadLetter(
        reason="receiver 'deleted' is not configured (create it: POST /v1/receivers); "
        "gave up after 5 attempts (last: no response)"
    )
    assert fake.requests == []
