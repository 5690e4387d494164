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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from prometheus_client import Counter, Histogram

from libs.common.db.pool import retry_while_unreachable
from libs.common.runtime import ServiceRuntime
from services.alerting.adapters.config_store import ConfigStore, Receiver
from services.alerting.adapters.delivery_store import Claimed, DeliveryStore
from services.alerting.adapters.receiver_client import ReceiverClient
from services.alerting.domain.outgoing import build_request
from services.alerting.domain.retry import DeadLetter, Delivered, Retry, RetryPolicy, next_attempt
from services.alerting.service.ports import Notifier
from services.alerting.service.unit_of_work import alerting_uow

__all__ = ["DeliveryWorker"]

#: The share of the evaluator's time hand-overs may take: a slow or down receiver under an alert storm must
#: not slow evaluation by more than this (each hand-over draws on a budget that refills at this rate).
HANDOVER_SHARE = 0.1

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
    def delivery_handover_s(self) -> float: ...

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


@dataclass(frozen=True, slots=True)
class Attempted:
    """One attempt as it went: what the receiver answered and what follows."""

    claimed: Claimed
    attempt: int
    status: int | None
    error: str | None
    elapsed_ms: float
    decision: Retry | DeadLetter | Delivered

    @property
    def outcome(self) -> str:
        """The delivery log's word for the decision."""
        return {Delivered: "delivered", Retry: "retry", DeadLetter: "dead"}[type(self.decision)]


class DeliveryWorker:
    """Background loop; `wake()` makes it look for due notifications at once, `hand_over()` also waits for
    it to have sent them."""

    def __init__(self, *, settings: DeliverySettings, rng: random.Random | None = None) -> None:
        self._settings = settings
        self._wake = asyncio.Event()
        # Wakes asked for, and the latest one a pass of the loop has caught up with (its claim found nothing
        # more due, so what was committed before that wake has been sent or waits for a retry).
        self._asked = 0
        self._caught_up = 0
        self._progress = asyncio.Condition()
        self._budget_s = settings.delivery_handover_s
        self._budget_at: float | None = None
        self._rng = rng or random.Random()
        self._policy = RetryPolicy(
            base=timedelta(seconds=settings.retry_base_s),
            cap=timedelta(seconds=settings.retry_cap_s),
            max_attempts=settings.retry_max_attempts,
            max_age=timedelta(seconds=settings.retry_max_age_s),
        )

    def wake(self) -> int:
        """New notifications were committed; returns this wake's number."""
        self._asked += 1
        self._wake.set()
        return self._asked

    async def hand_over(self) -> None:
        """New notifications were committed: wake the worker and wait, up to `delivery_handover_s`, until it
        has sent them.

        The evaluator calls this after each commit that made notifications. Evaluating holds the interpreter
        (on a worker thread) most of the time under a 10,000-GPU stream; the worker's every step would wait
        up to a switch interval for it, and a page would take tens of milliseconds more to go out. Pausing
        evaluation meanwhile costs the stream a few milliseconds per page, and never more than
        HANDOVER_SHARE of its time: a receiver that hangs each attempt until its timeout spends the budget,
        and the evaluator goes on without waiting until it has refilled."""
        asked = self.wake()
        clock = asyncio.get_running_loop().time
        now = clock()
        if self._budget_at is not None:
            refill = (now - self._budget_at) * HANDOVER_SHARE
            self._budget_s = min(self._settings.delivery_handover_s, self._budget_s + refill)
        self._budget_at = now
        if self._budget_s <= 0:
            return
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._budget_s), self._progress:
                    await self._progress.wait_for(lambda: self._caught_up >= asked)
        finally:
            self._budget_s -= clock() - now

    @property
    def handover_budget_s(self) -> float:
        """What the next hand-over may wait at most (before the refill since the last one)."""
        return self._budget_s

    async def run(self, runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set."""
        s = self._settings
        async with ReceiverClient(
            timeout_s=s.delivery_timeout_s, max_connections=s.delivery_concurrency
        ) as client:
            while not stop.is_set():
                self._wake.clear()
                asked = self._asked
                async with runtime.pool.acquire() as conn:
                    claimed = await DeliveryStore(conn).claim_due(
                        limit=s.delivery_concurrency * 4, lease_s=s.delivery_lease_s
                    )
                    receivers = {r.name: r for r in await ConfigStore(conn).receivers()} if claimed else {}
                if claimed:
                    await asyncio.gather(*(self._deliver(runtime, client, c, receivers) for c in claimed))
                    continue
                async with self._progress:
                    self._caught_up = asked
                    self._progress.notify_all()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=s.delivery_poll_s)

    async def _deliver(
        self,
        runtime: ServiceRuntime,
        client: Notifier,
        claimed: Claimed,
        receivers: dict[str, Receiver],
    ) -> None:
        attempt = claimed.attempts + 1
        receiver = receivers.get(claimed.receiver)
        started = time.perf_counter()
        status, retry_after, error = None, None, None
        if receiver is None:
            # Not there (yet): the default route's receiver before an admin creates it, or one deleted.
            # Nothing is sent; the notification waits with backoff, within the retry limits, for it.
            error = f"receiver {claimed.receiver!r} is not configured (create it: POST /v1/receivers)"
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
        if receiver is None and isinstance(decision, DeadLetter):
            decision = DeadLetter(reason=f"{error}; {decision.reason}")
        elapsed_ms = (time.perf_counter() - started) * 1000
        DELIVERY_SECONDS.observe(elapsed_ms / 1000)
        await self._record(runtime, Attempted(claimed, attempt, status, error, elapsed_ms, decision))

    async def _post(
        self, client: Notifier, receiver: Receiver, claimed: Claimed
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

    async def _record(self, runtime: ServiceRuntime, done: Attempted) -> None:
        DELIVERIES.labels(done.outcome).inc()
        # The request went out: its outcome is worth waiting a little for a database that blinked (else
        # the attempt stays 'sending' in the log and is sent again, with the same idempotency key, after
        # the lease).
        await retry_while_unreachable(
            lambda: self._record_once(runtime, done),
            what="alerting's delivery log",
            timeout_s=self._settings.delivery_lease_s / 2,
            first_delay_s=0.2,
            max_delay_s=2.0,
        )

    async def _record_once(self, runtime: ServiceRuntime, done: Attempted) -> None:
        claimed, attempt, decision = done.claimed, done.attempt, done.decision
        async with alerting_uow(runtime) as uow:
            store = uow.deliveries
            reason = decision.reason if isinstance(decision, DeadLetter) else done.error
            await store.log_attempt(
                claimed,
                attempt=attempt,
                status=done.status,
                outcome=done.outcome,
                error=reason,
                duration_ms=done.elapsed_ms,
            )
            if isinstance(decision, Delivered):
                await store.delivered(claimed.notification.id, attempts=attempt)
            elif isinstance(decision, Retry):
                await store.retry(
                    claimed.notification.id, attempts=attempt, at=decision.at, error=done.error or ""
                )
            else:
                await store.dead(claimed, attempts=attempt, reason=decision.reason)
                log.error("notification %s dead-lettered: %s", claimed.notification.id, decision.reason)
            await uow.commit()
