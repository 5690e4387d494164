"""Samples through the real broker to webhooks at a local receiver: timing, exactly-once, restarts."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import httpx
from fastapi import FastAPI

from libs.common.events import topics
from libs.common.events.alerting import AlertFiredV1, AlertResolvedV1
from libs.devkit.broker import free_port
from services.alerting.app import create_app
from services.alerting.domain.outgoing import IDEMPOTENCY_HEADER
from services.alerting.domain.signing import verify
from tests.integration.alerting.helpers import (
    SECRET,
    Feeder,
    Receiver,
    add_memory_rule,
    add_receiver,
    alerting_settings,
    alerts_in,
    receiving,
)
from tests.integration.support import ADMIN_HEADERS, Isolation, TopicReader, eventually, running


def _firing(receiver: Receiver) -> list[dict[str, object]]:
    return alerts_in(receiver.accepted(), "firing")


def _resolved(receiver: Receiver) -> list[dict[str, object]]:
    return alerts_in(receiver.accepted(), "resolved")


def _starts(alert: dict[str, object]) -> datetime:
    return datetime.fromisoformat(str(alert["startsAt"]).replace("Z", "+00:00"))


async def test_memory_above_90_percent_for_the_rules_duration_pages_once_and_resolves_once(
    isolation: Isolation,
) -> None:
    app = create_app(alerting_settings(isolation))
    feeder = Feeder(isolation, node="mem-node", mem_pct=50)
    async with receiving() as receiver, running(app) as client, feeder.running():
        await add_receiver(client, receiver)
        await add_memory_rule(client, name="MemHigh", node="mem-node", for_="2s")
        await eventually(
            lambda: _rule_loaded(app, "MemHigh"), timeout=20, what="rule loaded by the evaluator"
        )
        feeder.mem_pct = 95
        await eventually(lambda: _async(bool(_firing(receiver))), timeout=20, what="firing webhook")
        crossed = feeder.first_at(lambda pct: pct > 90)
        feeder.mem_pct = 40
        await eventually(lambda: _async(bool(_resolved(receiver))), timeout=20, what="resolve webhook")

        fired = _firing(receiver)
        assert [a["labels"]["alertname"] for a in fired] == ["MemHigh"]  # type: ignore[index]
        # `for` elapsed before it fired, and not much later (ticks are 100 ms, samples 250 ms apart).
        assert timedelta(seconds=2) <= _starts(fired[0]) - crossed < timedelta(seconds=2.6)
        assert len(_resolved(receiver)) == 1
        for request in receiver.requests:
            assert verify(
                secret=SECRET.encode(), body=request.body, headers=request.headers, now=int(time.time())
            )
        assert len({r.headers[IDEMPOTENCY_HEADER.lower()] for r in receiver.requests}) == 2

        fingerprint = str(fired[0]["fingerprint"])
        await eventually(lambda: _delivered(client, 2, fingerprint), what="deliveries marked")
        log = (await client.get(f"/v1/deliveries?fingerprint={fingerprint}", headers=ADMIN_HEADERS)).json()
        assert len(log) == 2
        assert all([a["outcome"] for a in n["attempt_log"]] == ["delivered"] for n in log)
        history = (await client.get("/v1/alerts/history?rule=MemHigh", headers=ADMIN_HEADERS)).json()
        assert [(h["status"], h["fingerprint"]) for h in history] == [("resolved", fingerprint)]

        topic = isolation.topic_prefix + topics.ALERTING
        async with TopicReader(bootstrap=isolation.infra.kafka, topic=topic) as reader:
            events = await reader.wait_for(
                lambda evs: any(isinstance(p, AlertResolvedV1) for _, p in evs), what="alert events"
            )
        kinds = [type(p).__name__ for _, p in events if getattr(p, "rule", "") == "MemHigh"]
        assert kinds == [AlertFiredV1.__name__, AlertResolvedV1.__name__]


async def test_receiver_down_then_back_gets_each_notification_exactly_once_late_and_in_order(
    isolation: Isolation,
) -> None:
    app = create_app(alerting_settings(isolation))
    receiver = Receiver(port=free_port())  # nothing listens yet: connection refused, then 503s, then 200s
    feeder = Feeder(isolation, node="down-node", mem_pct=95)
    async with running(app) as client:
        await add_receiver(client, receiver)
        await add_memory_rule(client, name="MemHighDown", node="down-node", for_="1s")
        await eventually(lambda: _rule_loaded(app, "MemHighDown"), timeout=20, what="rule loaded")
        async with feeder.running():
            await eventually(lambda: _attempts(client, 2), timeout=25, what="refused attempts")
            feeder.mem_pct = 40  # resolves while the receiver is still down
            await eventually(lambda: _notifications(client, 2), timeout=20, what="resolve queued")
        back_at = time.time() + 1.5
        receiver.responder = lambda: 503 if time.time() < back_at else 200
        await receiver.start()
        try:
            await eventually(
                lambda: _async(len(receiver.accepted()) == 2), timeout=25, what="late deliveries"
            )
            await eventually(lambda: _delivered(client, 2), what="deliveries marked")
            log = (await client.get("/v1/deliveries", headers=ADMIN_HEADERS)).json()
        finally:
            await receiver.stop()
    assert [r.json()["status"] for r in receiver.accepted()] == ["firing", "resolved"]
    assert any(r.status == 503 for r in receiver.requests)
    assert all(r.at >= back_at for r in receiver.accepted())
    assert len({r.headers[IDEMPOTENCY_HEADER.lower()] for r in receiver.accepted()}) == 2
    assert sorted(n["status"] for n in log) == ["delivered", "delivered"]
    for notification in log:
        outcomes = [a["outcome"] for a in notification["attempt_log"]]
        assert outcomes[-1] == "delivered"
        assert outcomes.count("delivered") == 1
        assert set(outcomes[:-1]) <= {"retry"}
    # The trigger was retried while the receiver was down; its resolve waited behind it, in order.
    oldest = min(log, key=lambda n: n["created_at"])
    assert len(oldest["attempt_log"]) >= 3


async def test_restart_while_pending_fires_at_the_original_time_exactly_once(isolation: Isolation) -> None:
    settings = alerting_settings(isolation)
    feeder = Feeder(isolation, node="restart-node", mem_pct=95)
    async with receiving() as receiver:
        first = create_app(settings)
        async with running(first) as client:
            await add_receiver(client, receiver)
            await add_memory_rule(client, name="MemHighRestart", node="restart-node", for_="8s")
            await eventually(lambda: _rule_loaded(first, "MemHighRestart"), timeout=20, what="rule loaded")
            async with feeder.running():
                await eventually(
                    lambda: _pending_persisted(first), timeout=20, what="pending state persisted"
                )
        crossed = feeder.sent[0][0]
        assert not receiver.requests
        second = create_app(settings)
        async with running(second) as client, feeder.running():
            await eventually(lambda: _async(bool(_firing(receiver))), timeout=25, what="firing after restart")
            await eventually(lambda: _delivered(client, 1), what="delivery marked")
            await eventually(lambda: _delivered(client, 1), what="delivery marked")
            log = (await client.get("/v1/deliveries", headers=ADMIN_HEADERS)).json()
    fired = _firing(receiver)
    assert len(fired) == 1
    assert len(receiver.requests) == 1
    assert [n["status"] for n in log] == ["delivered"]
    # Fired when the timer started before the restart ran out, not `for` after the restart.
    assert timedelta(seconds=8) <= _starts(fired[0]) - crossed < timedelta(seconds=9)


async def _async(value: bool) -> bool:
    return value


async def _rule_loaded(app: FastAPI, name: str) -> bool:
    return name in app.state.evaluator.rule_names


async def _attempts(client: httpx.AsyncClient, count: int) -> bool:
    response = await client.get("/v1/deliveries", headers=ADMIN_HEADERS)
    return any(len(n["attempt_log"]) >= count for n in response.json())


async def _delivered(client: httpx.AsyncClient, count: int, fingerprint: str = "") -> bool:
    query = f"?fingerprint={fingerprint}" if fingerprint else ""
    response = await client.get(f"/v1/deliveries{query}", headers=ADMIN_HEADERS)
    return bool(sum(n["status"] == "delivered" for n in response.json()) == count)


async def _notifications(client: httpx.AsyncClient, count: int) -> bool:
    response = await client.get("/v1/deliveries", headers=ADMIN_HEADERS)
    return len(response.json()) >= count


async def _pending_persisted(app: FastAPI) -> bool:
    async with app.state.runtime.pool.acquire() as conn:
        found = await conn.fetchval(
            "SELECT count(*) FROM series_state WHERE state->'alerts'->'MemHighRestart'->>'phase' = 'pending'"
        )
    return bool(found)
