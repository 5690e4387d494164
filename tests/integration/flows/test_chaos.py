"""The journey survives every process being SIGKILLed once at a random step and restarted.

Seed: FLOW_CHAOS_SEED, or a fresh one; it is printed, so a failure can be replayed exactly.
A kill lands between two steps of the journey (a step boundary chosen per process); the process is
restarted at once and the journey goes on. Alert delivery is at least once on the wire: after a crash
the same notification may be sent again with the same Idempotency-Key, which docs/alerting.md tells
receivers to dedupe on, so "exactly once" is counted by that key.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict

from libs.common.events import topics
from libs.devkit.devstack import AGENT
from tests.integration.alerting.helpers import receiving
from tests.integration.flows.checks import net_charge_periods, overlaps, quotas_and_allocations_agree
from tests.integration.flows.journey import Journey
from tests.integration.flows.suite import SERVICES, Suite


def _kill_plan(rng: random.Random, steps: int) -> dict[int, list[str]]:
    plan: defaultdict[int, list[str]] = defaultdict(list)
    for name in (*SERVICES, AGENT):
        plan[rng.randrange(1, steps)].append(name)
    return dict(plan)


async def test_every_service_killed_once_mid_journey_loses_and_doubles_no_charge_or_page(
    suite: Suite,
) -> None:
    seed = int(os.environ.get("FLOW_CHAOS_SEED") or random.randrange(1_000_000))
    print(f"chaos seed {seed} (FLOW_CHAOS_SEED={seed} replays it)")
    async with receiving() as receiver, suite.reader(topics.SCHEDULER) as scheduler_events:
        journey = Journey(suite=suite, receiver=receiver, scheduler_events=scheduler_events)
        names = [s.__name__ for s in journey.steps]
        plan = _kill_plan(random.Random(seed), len(names))
        killed: list[str] = []

        async def between(step: str) -> None:
            for name in plan.get(names.index(step), []):
                print(f"SIGKILL {name} before {step}")
                await suite.kill(name)
                await suite.restart(name)
                killed.append(name)

        journey.between = between
        await journey.run()

        assert sorted(killed) == sorted((*SERVICES, AGENT))
        firing = journey.pages("firing")
        assert len({r.headers["idempotency-key"] for r in firing}) == 1  # one page, maybe resent
        for workload_id in journey.workloads.values():
            assert overlaps(await net_charge_periods(suite, workload_id)) == []
        await quotas_and_allocations_agree(suite, ["acme", "globex"])
        assert await journey.reconciled()
