"""Issue 9's journey across all six processes and the node agent, on the real broker, Postgres and Redis."""

from __future__ import annotations

from libs.common.events import topics
from tests.integration.alerting.helpers import receiving
from tests.integration.flows.journey import TRACE_ID, Journey, traced
from tests.integration.flows.suite import Suite


async def test_two_tenants_journey_from_three_step_creation_to_a_signed_page_and_reconciled_bills(
    suite: Suite,
) -> None:
    async with receiving() as receiver, suite.reader(topics.SCHEDULER) as scheduler_events:
        journey = Journey(suite=suite, receiver=receiver, scheduler_events=scheduler_events)
        await journey.run()

        assert len(journey.pages("firing")) == 1  # no crash here: not even a same-key duplicate
        instance = journey.workloads["instance"]
        lifecycle = traced(await scheduler_events.poll(), instance)
        types = [t for t, _ in lifecycle]
        for expected in ("submitted", "queued", "placed", "running"):
            assert f"scheduler.workload.{expected}.v1" in types
        assert {trace for _, trace in lifecycle} == {TRACE_ID}  # one trace from the POST to running
