"""A page goes out before the evaluator goes on: after committing notifications it hands over to the
delivery worker and waits until they were sent (bounded by DELIVERY_HANDOVER_S)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from services.alerting.service.delivery_worker import DeliveryWorker
from tests.integration.alerting.helpers import alerts_in, paging
from tests.integration.support import Isolation, eventually


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
    async with paging(isolation, node="handover-node", rule="MemHighHandover", delivery_handover_s=10.0) as (
        _,
        receiver,
    ):
        receivers.append(receiver)  # before any page: the rule's `for` has not run out yet

        async def handed_over() -> list[tuple[int, float]] | None:
            return returned or None

        await eventually(handed_over, timeout=25, what="the evaluator's hand-over")
    pages, took_s = returned[0]
    assert pages == 1  # the page had arrived when the evaluator went on
    assert took_s < 5.0  # ended by the worker's word, not by the 10 s bound
