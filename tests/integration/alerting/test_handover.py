"""A page goes out before the evaluator goes on: after committing notifications it hands over to the
delivery worker and waits until they were sent (bounded by DELIVERY_HANDOVER_S)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from services.alerting.app import create_app
from services.alerting.service.delivery_worker import DeliveryWorker
from tests.integration.alerting.helpers import (
    Feeder,
    add_memory_rule,
    add_receiver,
    alerting_settings,
    alerts_in,
    receiving,
)
from tests.integration.support import Isolation, eventually, running


async def test_the_evaluator_resumes_only_once_the_page_it_committed_reached_the_receiver(
    isolation: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = DeliveryWorker.hand_over
    returned: list[tuple[int, float]] = []  # (firing pages the receiver had, seconds the hand-over took)
    receivers: list[Any] = []

    async def watched(self: DeliveryWorker) -> None:
        started = time.monotonic()
        await real(self)
        returned.append((len(alerts_in(receivers[0].accepted(), "firing")), time.monotonic() - started))

    monkeypatch.setattr(DeliveryWorker, "hand_over", watched)
    # A bound far longer than a delivery takes: the hand-over returns because the page went out.
    app = create_app(alerting_settings(isolation, delivery_handover_s=10.0))
    feeder = Feeder(isolation, node="handover-node", mem_pct=95)
    async with receiving() as receiver, running(app) as client, feeder.running():
        receivers.append(receiver)
        await add_receiver(client, receiver)
        await add_memory_rule(client, name="MemHighHandover", node="handover-node", for_="1s")

        async def handed_over() -> list[tuple[int, float]] | None:
            return returned or None

        await eventually(handed_over, timeout=25, what="the evaluator's hand-over")
    pages, took_s = returned[0]
    assert pages == 1  # the page had arrived when the evaluator went on
    assert took_s < 5.0  # ended by the worker's word, not by the 10 s bound
