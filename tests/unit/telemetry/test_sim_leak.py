"""The simulated memory leak creeps: memory stays above 90% long enough for the shipped 5-minute rule."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from services.alerting.domain.alert_lifecycle import TransitionKind
from services.alerting.domain.rules import DEFAULT_RULES
from services.alerting.domain.series_evaluation import Sample, SeriesState, evaluate
from services.telemetry.adapters.sim import (
    DEFAULT_LEAK_PCT_PER_MIN,
    FaultKind,
    FleetSpec,
    ProfileKind,
    SimFleet,
)
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.domain.metrics import GpuSample
from tests.unit.telemetry.conftest import T0, at

H100 = FleetSpec.uniform(nodes=1, model="H100", gpus_per_node=1, prefix="n")
GPU = gpu_uuid(hostname="n-0000", index=0)
LEAK_AT_S = 300  # the training job has reached its working set by then
MEMORY_RULE = next(r for r in DEFAULT_RULES if r.name == "GpuMemoryHigh")


@dataclass(frozen=True, slots=True)
class LeakRun:
    """What one leak did: per second its memory share, when it died of OOM, the rule's transitions."""

    pct: dict[int, float]
    oom_at_s: int
    transitions: dict[int, TransitionKind]

    @property
    def above_90_since_s(self) -> int:
        """The first second of the last stretch above 90% before the OOM."""
        return min(s for s in self.pct if s > max(s for s, p in self.pct.items() if p <= 90))


def _leak(*, leak_pct_per_min: float | None, speed: float = 1.0, limit_s: int = 3600) -> LeakRun:
    """Train on an H100, inject a leak at LEAK_AT_S, sample every second and evaluate the shipped rule."""
    fleet = SimFleet(spec=H100, start=T0, speed=speed)
    fleet.assign_workload(gpu_uuid=GPU, workload_id="job", kind=ProfileKind.TRAINING, started_at=T0)
    pct: dict[int, float] = {}
    transitions: dict[int, TransitionKind] = {}
    state: SeriesState | None = None
    labels = {"gpu": GPU, "node": "n-0000", "model": "H100"}
    for second in range(limit_s):
        if second == LEAK_AT_S:
            fleet.inject_fault(
                gpu_uuid=GPU, fault=FaultKind.MEMORY_LEAK, now=at(second), leak_pct_per_min=leak_pct_per_min
            )
        if any(r.event == "failed" for r in fleet.advance(now=at(second))):
            # The OOM struck in the previous second's step: that sample already shows the memory freed.
            del pct[second - 1]
            return LeakRun(pct=pct, oom_at_s=second - 1, transitions=transitions)
        sample = fleet.sample_node(hostname="n-0000", now=at(second))[0]
        assert isinstance(sample, GpuSample)
        assert sample.fb_used_pct is not None
        pct[second] = sample.fb_used_pct
        values = {"fb_used_pct": sample.fb_used_pct}
        step = evaluate(
            state=state, sample=Sample(labels=labels, values=values), rules=[MEMORY_RULE], now=at(second)
        )
        state = step.state
        transitions.update((second, t.kind) for t in step.transitions)
    pytest.fail(f"no OOM within {limit_s} s")


def test_a_default_leak_stays_above_90_percent_for_over_5_minutes_before_the_oom() -> None:
    run = _leak(leak_pct_per_min=None)
    above_s = run.oom_at_s - run.above_90_since_s
    assert above_s > 6 * 60, f"only {above_s} s above 90% before the OOM"
    assert max(run.pct.values()) > 99
    assert run.pct[LEAK_AT_S - 1] < 80  # the job's own working set, before the leak


def test_the_shipped_memory_rule_pages_on_a_default_leak_before_the_job_dies() -> None:
    run = _leak(leak_pct_per_min=None)
    firing = [s for s, kind in run.transitions.items() if kind is TransitionKind.FIRING]
    assert len(firing) == 1
    assert run.above_90_since_s + 300 <= firing[0] < run.oom_at_s


def test_a_leak_given_a_faster_rate_reaches_the_oom_sooner_and_too_soon_for_the_5_minute_rule() -> None:
    default, fast = _leak(leak_pct_per_min=None), _leak(leak_pct_per_min=30 * DEFAULT_LEAK_PCT_PER_MIN)
    assert fast.oom_at_s - LEAK_AT_S < (default.oom_at_s - LEAK_AT_S) / 10
    assert TransitionKind.FIRING not in fast.transitions.values()


def test_a_faster_fleet_runs_the_default_leak_faster_in_wall_time() -> None:
    slow, fast = _leak(leak_pct_per_min=None), _leak(leak_pct_per_min=None, speed=5)
    assert fast.oom_at_s - LEAK_AT_S < (slow.oom_at_s - LEAK_AT_S) / 4
