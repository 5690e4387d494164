"""The delivery worker: sends due notifications, retries with backoff, dead-letters, logs every attempt.

At-least-once towards receivers: a notification is marked delivered only after a 2xx; a crash between
the 2xx and that mark resends it with the same Idempotency-Key, which receivers use to deduplicate.
Several replicas can run it: a notification is leased (row lock, SKIP LOCKED) before it is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from prometheus_client import Counter, Histogram

from libs.common.runtime import ServiceRuntime
from services.alerting.adapters.config_store import ConfigStore, Receiver
from services.alerting.adapters.delivery_store import Claimed, DeliveryStore
from services.alerting.adapters.receiver_client import ReceiverClient
from services.alerting.domain.outgoing import build_request
from services.alerting.domain.retry import DeadLetter, Delivered, Retry, RetryPolicy, next_attempt

__all__ = ["DeliveryWorker"]

log = logging.getLogger(__name__)

DELIVERIES = Counter(
    "gpucloud_alerting_delivery_attempts_total", "Delivery attempts by outcome.", ["outcome"]
)
DELIVERY_SECONDS = Histogram("gpucloud_alerting_delivery_seconds", "Duration of one delivery attempt.")


class DeliverySettings(Protocol):
    """What the worker reads of the service's settings (the wiring passes AlertingSettings)."""

    @property
    def external_url(self) -> str: ...

    @property
    def delivery_poll_s(self) -> float: ...

    @property
    def delivery_timeout_s(self) -> float: ...

    @property
    def delivery_concurrency(self) -> int: ...

    @property
    def delivery_lease_s(self) -> float: ...

    @property
    def retry_base_s(self) -> float: ...

    @property
    def retry_cap_s(self) -> float: ...

    @property
    def retry_max_attempts(self) -> int: ...

    @property
    def retry_max_age_s(self) -> float: ...


class DeliveryWorker:
    """Background loop; `wake()` makes it look for due notifications at once."""

    def __init__(self, *, settings: DeliverySettings, rng: random.Random | None = None) -> None:
        self._settings = settings
        self._wake = asyncio.Event()
        self._rng = rng or random.Random()
        self._policy = RetryPolicy(
            base=timedelta(seconds=settings.retry_base_s),
            cap=timedelta(seconds=settings.retry_cap_s),
            max_attempts=settings.retry_max_attempts,
            max_age=timedelta(seconds=settings.retry_max_age_s),
        )

    def wake(self) -> None:
        """New notifications were committed."""
        self._wake.set()

    async def run(self, runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set."""
        s = self._settings
        async with ReceiverClient(
            timeout_s=s.delivery_timeout_s, max_connections=s.delivery_concurrency
        ) as client:
            while not stop.is_set():
                self._wake.clear()
                async with runtime.pool.acquire() as conn:
                    claimed = await DeliveryStore(conn).claim_due(
                        limit=s.delivery_concurrency * 4, lease_s=s.delivery_lease_s
                    )
                    receivers = {r.name: r for r in await ConfigStore(conn).receivers()} if claimed else {}
                if claimed:
                    await asyncio.gather(*(self._deliver(runtime, client, c, receivers) for c in claimed))
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=s.delivery_poll_s)

    async def _deliver(
        self,
        runtime: ServiceRuntime,
        client: ReceiverClient,
        claimed: Claimed,
        receivers: dict[str, Receiver],
    ) -> None:
        attempt = claimed.attempts + 1
        receiver = receivers.get(claimed.receiver)
        started = time.perf_counter()
        status, retry_after, error = None, None, None
        if receiver is None:
            error = f"receiver {claimed.receiver!r} is not configured"
            decision: Retry | DeadLetter | Delivered = DeadLetter(reason=error)
        else:
            status, retry_after, error = await self._post(client, receiver, claimed)
            decision = next_attempt(
                attempt=attempt,
                status=status,
                retry_after=retry_after,
                now=datetime.now(UTC),
                first_attempt_at=claimed.first_attempt_at,
                policy=self._policy,
                rng=self._rng,
            )
        elapsed_ms = (time.perf_counter() - started) * 1000
        DELIVERY_SECONDS.observe(elapsed_ms / 1000)
        await self._record(runtime, claimed, attempt, status, error, elapsed_ms, decision)

    async def _post(
        self, client: ReceiverClient, receiver: Receiver, claimed: Claimed
    ) -> tuple[int | None, str | None, str | None]:
        request = build_request(
            kind=receiver.kind,
            url=receiver.url,
            notification=claimed.notification,
            secret=receiver.secret,
            routing_key=receiver.routing_key,
            external_url=self._settings.external_url,
            timestamp=int(time.time()),
        )
        return await client.send(request)

    async def _record(
        self,
        runtime: ServiceRuntime,
        claimed: Claimed,
        attempt: int,
        status: int | None,
        error: str | None,
        elapsed_ms: float,
        decision: Retry | DeadLetter | Delivered,
    ) -> None:
        outcome = {Delivered: "delivered", Retry: "retry", DeadLetter: "dead"}[type(decision)]
        DELIVERIES.labels(outcome).inc()
        async with runtime.uow() as uow:
            store = DeliveryStore(uow.conn)
            reason = decision.reason if isinstance(decision, DeadLetter) else error
            await store.log_attempt(
                claimed, attempt=attempt, status=status, outcome=outcome, error=reason, duration_ms=elapsed_ms
            )
            if isinstance(decision, Delivered):
                await store.delivered(claimed.notification.id, attempts=attempt)
            elif isinstance(decision, Retry):
                await store.retry(
                    claimed.notification.id, attempts=attempt, at=decision.at, error=error or ""
                )
            else:
                await store.dead(claimed, attempts=attempt, reason=decision.reason)
                log.error("notification %s dead-lettered: %s", claimed.notification.id, decision.reason)
            await uow.commit()
