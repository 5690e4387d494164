"""The health check after a reset or reboot believes only readings taken after it (issue 17, item 5)."""

from __future__ import annotations

from datetime import timedelta

from services.recovery.adapters.sample_window import window_entry
from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from services.recovery.domain.detection import fails_health_check, open_incident
from services.recovery.domain.health import GpuReading, HealthVerdict, judge_health
from services.recovery.domain.incidents import (
    Incident,
    IncidentState,
    drain_completed,
    record_progress,
    start_diagnosis,
    start_remediation,
    verifying_since,
)
from services.recovery.domain.window_samples import to_readings, to_samples
from services.recovery.domain.workload_moves import MigrationPhase
from tests.unit.recovery.conftest import T0

S = timedelta(seconds=1)
ACTION = T0 + 10 * S  # when the reset or reboot was asked for


def reading(gpu: str, second: int, *, answering: bool = True) -> GpuReading:
    return GpuReading(gpu=gpu, at=T0 + second * S, answering=answering)


def test_a_gpu_still_reported_lost_after_the_reboot_fails_the_check() -> None:
    readings = {
        "g1": [reading("g1", 5), reading("g1", 11, answering=False), reading("g1", 12, answering=False)]
    }
    check = judge_health(gpus=["g1"], readings=readings, after=ACTION)
    assert check.verdict is HealthVerdict.LOST
    assert not check.passed
    assert "g1" in check.detail


def test_a_reading_from_before_the_action_proves_nothing() -> None:
    readings = {"g1": [reading("g1", 9), reading("g1", 10)]}
    assert judge_health(gpus=["g1"], readings=readings, after=ACTION).verdict is HealthVerdict.NO_READING


def test_the_latest_reading_after_the_action_decides() -> None:
    came_back = [reading("g1", 11, answering=False), reading("g1", 13)]
    assert judge_health(gpus=["g1"], readings={"g1": came_back}, after=ACTION).passed
    fell_again = [reading("g1", 13, answering=False), reading("g1", 11)]
    assert judge_health(gpus=["g1"], readings={"g1": fell_again}, after=ACTION).verdict is HealthVerdict.LOST


def test_a_node_passes_only_when_every_gpu_answered_after_the_reboot() -> None:
    readings = {"g1": [reading("g1", 12)], "g2": [reading("g2", 12, answering=False)]}
    assert judge_health(gpus=["g1", "g2"], readings=readings, after=ACTION).verdict is HealthVerdict.LOST
    assert (
        judge_health(gpus=["g1", "g3"], readings=readings, after=ACTION).verdict is HealthVerdict.NO_READING
    )
    assert judge_health(gpus=[], readings=readings, after=ACTION).verdict is HealthVerdict.NO_READING


def test_the_window_keeps_lost_readings_as_lost_and_leaves_them_out_of_diagnosis() -> None:
    lost = window_entry(
        {"gpu": "g1", "index": 0, "xid_count": 1, "lost_reason": "fell off the bus"}, at=T0 + 11 * S
    )
    answering = window_entry({"gpu": "g1", "index": 0, "xid_count": 0, "gpu_temp_c": 50.0}, at=T0 + 9 * S)
    assert to_readings("g1", [lost, answering]) == [reading("g1", 9), reading("g1", 11, answering=False)]
    samples = to_samples("g1", [lost, answering], until=T0 + 20 * S)
    assert [s.at for s in samples] == [T0 + 9 * S]


def _verifying_xid_79(catalog: FaultCatalog) -> Incident:
    signal = FaultSignal(kind=FaultKind.XID, xid=79, gpu="g1", node="n1", at=T0)
    opened = open_incident(
        incident_id="inc-1",
        signal=signal,
        classification=classify(signal, catalog=catalog),
        workload_ids=("w1",),
        detected_at=T0 + S,
    )
    diagnosing = start_diagnosis(opened, at=T0 + 2 * S).incident
    draining = start_remediation(diagnosing, diagnosis=None, at=T0 + 3 * S).incident
    incident = drain_completed(draining, at=T0 + 4 * S).incident
    for step, phase in enumerate([MigrationPhase.CHECKPOINT, MigrationPhase.RUNNING]):
        incident = record_progress(
            incident, workload_id="w1", phase=phase, percent=50 * (step + 1), at=T0 + (9 + step) * S
        ).incident
    assert incident.state is IncidentState.VERIFYING
    assert verifying_since(incident) == ACTION
    return incident


def _signal(kind: FaultKind, second: int, *, xid: int | None = None, gpu: str = "g1") -> FaultSignal:
    return FaultSignal(kind=kind, xid=xid, gpu=gpu, node="n1", at=T0 + second * S)


def test_the_gpu_still_reported_lost_leaves_the_check_to_the_readings(catalog: FaultCatalog) -> None:
    incident = _verifying_xid_79(catalog)
    assert not fails_health_check(incident, _signal(FaultKind.LOST, 12), readings_decide=True)
    # Without readings kept, the lost GPU is the only evidence there is: it fails the check.
    assert fails_health_check(incident, _signal(FaultKind.LOST, 12), readings_decide=False)


def test_a_new_fault_after_the_reboot_fails_the_check_and_a_late_report_does_not(
    catalog: FaultCatalog,
) -> None:
    incident = _verifying_xid_79(catalog)
    assert fails_health_check(incident, _signal(FaultKind.XID, 12, xid=48), readings_decide=True)
    # The node was rebooted: a fault on another of its GPUs fails it too.
    assert fails_health_check(incident, _signal(FaultKind.XID, 12, xid=48, gpu="g2"), readings_decide=True)
    assert not fails_health_check(incident, _signal(FaultKind.XID, 8, xid=79), readings_decide=True)
