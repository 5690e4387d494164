"""The placement book with a runner that tells exits after stops (the process runner's way), and the
choice of runner (TELEMETRY_AGENT_RUNNER)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import AllocationItem, RunSpec, WorkloadEndedV1, WorkloadPlacedV1
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.runner import RunnerReport, SimWorkloadRunner, StopReason
from services.telemetry.service.agent.setup import simulated_setup, with_runner
from services.telemetry.settings import TelemetrySettings

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GPU = "GPU-0"


@dataclass
class RecordingRunner:
    """Records calls; a stop of a started workload says its exit follows; reports are queued by hand."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    queued: list[RunnerReport] = field(default_factory=list)

    def start(self, **kw: Any) -> None:
        self.calls.append(("start", kw))

    def stop(self, *, workload_id: str, reason: StopReason = "cancelled") -> bool:
        self.calls.append(("stop", {"workload_id": workload_id, "reason": reason}))
        return reason != "moved"

    def migrate(self, **kw: Any) -> None:
        self.calls.append(("migrate", kw))

    def set_profile(self, *, workload_id: str, profile: str) -> bool:
        return False

    def poll(self, *, now: datetime) -> list[RunnerReport]:
        out, self.queued = self.queued, []
        return out

    def delivered(self) -> None:
        return None


def _placed(placement: str = "p1", *, run: RunSpec | None = None) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id="w1",
        tenant_id="acme",
        placement_id=placement,
        node="n1",
        allocations=[
            AllocationItem(gpu_uuid=GPU, units=Decimal(1), model="H100"),
            AllocationItem(gpu_uuid="GPU-elsewhere", units=Decimal(1), model="H100"),
        ],
        kind="job",
        run=run,
    )


def _ended(outcome: Any, placement: str = "p1") -> WorkloadEndedV1:
    return WorkloadEndedV1(workload_id="w1", tenant_id="acme", placement_id=placement, outcome=outcome)


def _report(event: Any, placement: str | None = "p1", **kw: Any) -> RunnerReport:
    return RunnerReport(workload_id="w1", event=event, at=T0, placement_id=placement, **kw)


def test_the_runner_gets_the_run_spec_tenant_placement_and_only_this_agents_allocations() -> None:
    runner = RecordingRunner()
    spec = RunSpec(command=["python", "train.py"])
    PlacementBook(runner=runner, gpus=frozenset({GPU})).apply(_placed(run=spec), at=T0)
    ((call, kw),) = runner.calls
    assert call == "start"
    assert (kw["run"], kw["tenant_id"], kw["placement_id"]) == (spec, "acme", "p1")
    assert [a.gpu_uuid for a in kw["allocations"]] == [GPU]


def test_a_started_report_carries_the_pid_and_the_runner() -> None:
    runner = RecordingRunner()
    book = PlacementBook(runner=runner, gpus=frozenset({GPU}))
    book.apply(_placed(), at=T0)
    runner.queued = [_report("started", pid=4242, runner="process")]
    (started,) = book.reports(now=T0)
    assert isinstance(started, WorkloadStartedV1)
    assert (started.pid, started.runner, started.placement_id) == (4242, "process", "p1")


@pytest.mark.parametrize(("outcome", "reason"), [("cancelled", "cancelled"), ("preempted", "preempted")])
def test_a_stopped_workloads_exit_is_still_reported_with_the_schedulers_reason(
    outcome: str, reason: str
) -> None:
    runner = RecordingRunner()
    book = PlacementBook(runner=runner, gpus=frozenset({GPU}))
    book.apply(_placed(), at=T0)
    book.apply(_ended(outcome), at=T0)
    assert runner.calls[-1] == ("stop", {"workload_id": "w1", "reason": reason})
    assert book.holds("w1")  # held until its exit is told
    assert book.allocations() == {}  # its GPUs are not labelled as its any more
    runner.queued = [_report("failed", exit_reason=reason, signal=15)]
    (exited,) = book.reports(now=T0)
    assert isinstance(exited, WorkloadExitedV1)
    assert (exited.exit_reason, exited.signal, exited.placement_id) == (reason, 15, "p1")
    assert not book.holds("w1")


def test_two_placements_ended_before_either_exit_is_told_both_have_their_exit_reported() -> None:
    """Preempted, placed here again, preempted again, and only then the first run's exit: both are told."""
    runner = RecordingRunner()
    book = PlacementBook(runner=runner, gpus=frozenset({GPU}))
    book.apply(_placed("p1"), at=T0)
    book.apply(_ended("preempted", "p1"), at=T0)
    book.apply(_placed("p2"), at=T0)
    book.apply(_ended("preempted", "p2"), at=T0)
    runner.queued = [
        _report("failed", placement="p1", exit_reason="preempted", signal=15),
        _report("failed", placement="p2", exit_reason="preempted", signal=9),
    ]
    exits = book.reports(now=T0)
    assert [(e.placement_id, e.signal) for e in exits if isinstance(e, WorkloadExitedV1)] == [
        ("p1", 15),
        ("p2", 9),
    ]
    assert not book.holds("w1")


def test_the_source_of_a_migration_is_stopped_as_moved_and_reports_of_another_placement_are_dropped() -> None:
    runner = RecordingRunner()
    book = PlacementBook(runner=runner, gpus=frozenset({GPU}))
    book.apply(_placed(), at=T0)
    book.apply(_ended("migrated"), at=T0)
    assert runner.calls[-1] == ("stop", {"workload_id": "w1", "reason": "moved"})
    assert not book.holds("w1")
    book.apply(_placed("p2"), at=T0)
    runner.queued = [_report("failed", placement="p1", exit_reason="cancelled")]
    assert book.reports(now=T0) == []


def _settings(tmp_path: Path, runner: Any) -> TelemetrySettings:
    return TelemetrySettings(agent_runner=runner, agent_workload_dir=tmp_path / "runs")


async def test_auto_plays_a_simulated_fleet_with_the_simulator_and_process_runs_processes_on_it(
    tmp_path: Path,
) -> None:
    setup = await simulated_setup(settings=_settings(tmp_path, "auto"), clock=lambda: T0)
    assert isinstance(with_runner(setup, settings=_settings(tmp_path, "auto")).runner, SimWorkloadRunner)
    chosen = with_runner(setup, settings=_settings(tmp_path, "process")).runner
    assert isinstance(chosen, ProcessRunner)
    assert chosen.root.parent == tmp_path / "runs"


async def test_the_simulated_runner_refuses_real_gpus(tmp_path: Path) -> None:
    setup = await simulated_setup(settings=_settings(tmp_path, "auto"), clock=lambda: T0)
    real = type(setup)(source="nvml", probes={}, discoveries=setup.discoveries, runner=setup.runner)
    with pytest.raises(ValueError, match="TELEMETRY_AGENT_RUNNER=simulated needs a simulated fleet"):
        with_runner(real, settings=_settings(tmp_path, "simulated"))
    assert isinstance(with_runner(real, settings=_settings(tmp_path, "auto")).runner, ProcessRunner)
