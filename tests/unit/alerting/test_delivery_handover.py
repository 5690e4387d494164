"""The evaluator's hand-over to the delivery worker is bounded: it never waits on an absent worker."""

from __future__ import annotations

import asyncio
import dataclasses

from services.alerting.service.delivery_worker import DeliveryWorker
from tests.unit.alerting.test_notifier_delivery_decisions import Settings


async def test_a_hand_over_with_no_worker_running_gives_up_after_its_bound() -> None:
    worker = DeliveryWorker(settings=dataclasses.replace(Settings(), delivery_handover_s=0.05))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(worker.hand_over(), timeout=5)
    assert loop.time() - started >= 0.05  # it waited for the worker, up to its bound, then went on
    assert worker.wake() == 2  # the hand-over was a wake: the worker would look at once


async def test_hand_overs_take_at_most_their_share_of_the_evaluators_time() -> None:
    # A worker that never catches up (a receiver hanging every attempt): the first hand-over spends the
    # budget, the next ones wait only for what refilled since (a tenth of the time that passed).
    worker = DeliveryWorker(settings=dataclasses.replace(Settings(), delivery_handover_s=0.2))
    loop = asyncio.get_running_loop()
    await worker.hand_over()
    assert worker.handover_budget_s <= 0.0
    started = loop.time()
    for _ in range(5):
        await worker.hand_over()
    spent = loop.time() - started
    assert spent < 0.2  # five more hand-overs waited less than one full bound in all
    assert worker.handover_budget_s <= 0.0


async def test_a_hand_over_of_zero_only_wakes_the_worker() -> None:
    worker = DeliveryWorker(settings=dataclasses.replace(Settings(), delivery_handover_s=0.0))
    waiting = asyncio.ensure_future(worker.hand_over())
    await asyncio.sleep(0)
    assert waiting.done()
    assert worker.wake() == 2
