"""A run's notes (memory not isolated, restarted from the start, the limits) reach WorkloadStartedV1."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from libs.common.events import EVENT_TYPES, decode, encode, envelop
from libs.common.events.agent import WorkloadStartedV1
from services.telemetry.adapters.runner.runs import Run, started_report
from services.telemetry.service.agent.placements import PlacementBook
from tests.unit.telemetry.test_agent_runner_book import GPU, RecordingRunner, _placed

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SHARED = "memory not isolated: a time-sliced share without an MPS control daemon on this host"
LIMITS = "limits not enforced: no cgroup v2 hierarchy here (cgroup v1 limits are not implemented)"


def test_the_started_report_carries_the_runs_notes_and_the_limits_line_as_notes() -> None:
    run = Run(path=Path("/nowhere"), workload_id="w1", placement_id="p1", notes=(SHARED,))
    report = started_report(run, {"pid": 4242, "at": T0.isoformat(), "limits": LIMITS})
    assert report.notes == (SHARED, LIMITS)
    assert report.reason == f"{SHARED}; {LIMITS}"  # the agent's log line, as before


def test_a_start_without_notes_or_limits_says_nothing() -> None:
    report = started_report(Run(path=Path("/nowhere"), workload_id="w1", placement_id="p1"), {"pid": 1})
    assert (report.notes, report.reason) == ((), "")


def test_the_books_started_event_carries_the_reports_notes() -> None:
    runner = RecordingRunner()
    book = PlacementBook(runner=runner, gpus=frozenset({GPU}))
    book.apply(_placed(), at=T0)
    run = Run(path=Path("/nowhere"), workload_id="w1", placement_id="p1", notes=(SHARED,))
    runner.queued = [started_report(run, {"pid": 4242, "at": T0.isoformat(), "limits": LIMITS})]
    (started,) = book.reports(now=T0)
    assert isinstance(started, WorkloadStartedV1)
    assert started.notes == [SHARED, LIMITS]


def test_notes_survive_the_wire_and_an_event_from_an_older_agent_has_none() -> None:
    ids: Any = {"workload_id": "w1", "tenant_id": "acme", "placement_id": "p1", "node": "n1"}
    event = WorkloadStartedV1(**ids, pid=7, runner="process", notes=[SHARED])
    _, decoded = decode(encode(envelop(event, source="test")), EVENT_TYPES)
    assert isinstance(decoded, WorkloadStartedV1)
    assert decoded.notes == [SHARED]
    assert WorkloadStartedV1.model_validate({**ids, "pid": 7}).notes == []
