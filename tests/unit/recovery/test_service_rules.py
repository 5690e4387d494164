"""Rules added with the running service: repeats after recovery, drain widening, signal translation."""

from __future__ import annotations

from datetime import timedelta

from libs.common.events.alerting import AlertFiredV1
from libs.common.events.telemetry import FaultSignaledV1, GpuMetrics
from services.recovery.adapters.sample_window import window_entry
from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from services.recovery.domain.commands import DrainGpu, DrainNode, Escalate, MigrateWorkload
from services.recovery.domain.correlate import Cause, Diagnosis
from services.recovery.domain.detection import DetectionOutcome, ingest_signal
from services.recovery.domain.incidents import (
    Incident,
    IncidentState,
    RecoveryPolicy,
    drain_completed,
    record_health_check,
    record_progress,
    start_diagnosis,
    start_remediation,
)
from services.recovery.domain.window_samples import to_samples
from services.recovery.domain.workload_moves import MigrationPhase
from services.recovery.service.signals import from_alert, from_fault
from tests.unit.recovery.conftest import T0

POLICY = RecoveryPolicy()


def _signal(xid: int, *, minutes: float = 0) -> FaultSignal:
    return FaultSignal(kind=FaultKind.XID, xid=xid, gpu="g1", node="n1", at=T0 + timedelta(minutes=minutes))


def _resolved_xid_48(catalog: FaultCatalog) -> Incident:
    signal = _signal(48)
    opened = ingest_signal(
        signal=signal, classification=classify(signal, catalog=catalog), incidents=[], workload_ids=[],
        incident_id="i1", detected_at=T0, policy=POLICY,
    ).incident  # fmt: skip
    assert opened is not None
    t = start_remediation(start_diagnosis(opened, at=T0).incident, diagnosis=None, at=T0)
    t = drain_completed(t.incident, at=T0)
    return record_health_check(t.incident, passed=True, at=T0).incident


def test_a_repeat_within_the_fold_window_after_recovery_opens_a_repeat_incident(
    catalog: FaultCatalog,
) -> None:
    resolved = _resolved_xid_48(catalog)
    assert resolved.state is IncidentState.RESOLVED
    repeat = _signal(48, minutes=5)
    detection = ingest_signal(
        signal=repeat, classification=classify(repeat, catalog=catalog), incidents=[resolved],
        workload_ids=["w1"], incident_id="i2", detected_at=repeat.at, policy=POLICY,
    )  # fmt: skip
    assert detection.outcome is DetectionOutcome.OPENED
    assert detection.incident is not None
    assert detection.incident.repeat_of == "i1"


def test_a_repeat_incident_moves_its_workloads_then_escalates(catalog: FaultCatalog) -> None:
    resolved = _resolved_xid_48(catalog)
    repeat = _signal(48, minutes=5)
    incident = ingest_signal(
        signal=repeat, classification=classify(repeat, catalog=catalog), incidents=[resolved],
        workload_ids=["w1"], incident_id="i2", detected_at=repeat.at, policy=POLICY,
    ).incident  # fmt: skip
    assert incident is not None
    t = start_remediation(start_diagnosis(incident, at=repeat.at).incident, diagnosis=None, at=repeat.at)
    t = drain_completed(t.incident, at=repeat.at)
    assert t.commands == (MigrateWorkload(workload_id="w1", away_from_gpu="g1"),)
    done = record_progress(
        t.incident, workload_id="w1", phase=MigrationPhase.RUNNING, percent=100, at=repeat.at
    )
    assert done.incident.state is IncidentState.ESCALATED
    assert isinstance(done.commands[-1], Escalate)


def test_a_repeat_long_after_recovery_opens_an_ordinary_incident(catalog: FaultCatalog) -> None:
    resolved = _resolved_xid_48(catalog)
    late = _signal(48, minutes=30)
    detection = ingest_signal(
        signal=late, classification=classify(late, catalog=catalog), incidents=[resolved],
        workload_ids=[], incident_id="i2", detected_at=late.at, policy=POLICY,
    )  # fmt: skip
    assert detection.incident is not None
    assert detection.incident.repeat_of is None


def _diagnosing(catalog: FaultCatalog) -> Incident:
    signal = _signal(48)
    incident = ingest_signal(
        signal=signal, classification=classify(signal, catalog=catalog), incidents=[], workload_ids=["w1"],
        incident_id="i1", detected_at=T0, policy=POLICY,
    ).incident  # fmt: skip
    assert incident is not None
    return start_diagnosis(incident, at=T0).incident


def test_a_confident_node_diagnosis_widens_a_gpu_drain_to_the_node_and_its_workloads(
    catalog: FaultCatalog,
) -> None:
    diagnosis = Diagnosis(probable_cause=Cause.NODE_OR_INTERCONNECT, confidence=0.8)
    t = start_remediation(_diagnosing(catalog), diagnosis=diagnosis, at=T0, node_workload_ids=["w1", "w2"])
    assert isinstance(t.commands[0], DrainNode)
    assert t.incident.workload_ids == ("w1", "w2")


def test_a_weak_node_diagnosis_keeps_the_drain_on_the_gpu(catalog: FaultCatalog) -> None:
    diagnosis = Diagnosis(probable_cause=Cause.NODE_OR_INTERCONNECT, confidence=0.65)
    t = start_remediation(_diagnosing(catalog), diagnosis=diagnosis, at=T0, node_workload_ids=["w1", "w2"])
    assert isinstance(t.commands[0], DrainGpu)
    assert t.incident.workload_ids == ("w1",)


def test_a_telemetry_fault_becomes_a_core_signal_with_scalar_evidence() -> None:
    event = FaultSignaledV1(
        fault_id="f",
        kind="xid",
        xid=79,
        gpu_uuid="g1",
        node="n1",
        at=T0,
        evidence={"n": 3, "nested": {"a": 1}},
    )
    signal = from_fault(event)
    assert (signal.kind, signal.xid, signal.gpu) == (FaultKind.XID, 79, "g1")
    assert signal.evidence == {"n": 3, "nested": "{'a': 1}"}


def test_only_fault_alerts_become_signals_and_agent_silence_is_node_wide() -> None:
    silent = AlertFiredV1(
        fingerprint="fp", rule="NodeAgentSilent", severity="critical", labels={"node": "n1"}, starts_at=T0
    )
    hot = AlertFiredV1(
        fingerprint="fp2", rule="GpuTemperatureHigh", severity="warning", labels={}, starts_at=T0
    )
    signal = from_alert(silent)
    assert signal is not None
    assert (signal.kind, signal.gpu, signal.node) == (FaultKind.AGENT_SILENT, None, "n1")
    assert from_alert(hot) is None


def test_window_records_become_samples_with_xids_per_second_up_to_the_fault() -> None:
    entries = [
        window_entry(
            GpuMetrics(gpu="g1", index=0, xid_count=n, gpu_temp_c=70).model_dump(),
            at=T0 + timedelta(seconds=s),
        )
        for s, n in ((2, 3), (0, 1), (1, 1), (5, 9))
    ]
    samples = to_samples("g1", entries, until=T0 + timedelta(seconds=3))
    assert [s.at for s in samples] == [T0 + timedelta(seconds=s) for s in (0, 1, 2)]
    assert [s.xid_count for s in samples] == [0, 0, 2]


def test_a_late_gpu_lost_report_of_a_recovered_xid_79_folds_instead_of_opening_a_repeat(
    catalog: FaultCatalog,
) -> None:
    xid_79 = _signal(79)
    opened = ingest_signal(
        signal=xid_79, classification=classify(xid_79, catalog=catalog), incidents=[], workload_ids=[],
        incident_id="i1", detected_at=T0, policy=POLICY,
    ).incident  # fmt: skip
    assert opened is not None
    minute = timedelta(minutes=1)
    draining = start_remediation(start_diagnosis(opened, at=T0).incident, diagnosis=None, at=T0)
    verifying = drain_completed(draining.incident, at=T0 + minute).incident  # no workloads: reboot now
    assert verifying.state is IncidentState.VERIFYING
    resolved = record_health_check(verifying, passed=True, at=T0 + 2 * minute).incident

    def ingest(at: timedelta) -> DetectionOutcome:
        lost = FaultSignal(kind=FaultKind.LOST, gpu="g1", node="n1", at=T0 + at)
        return ingest_signal(
            signal=lost, classification=classify(lost, catalog=catalog), incidents=[resolved],
            workload_ids=[], incident_id="i2", detected_at=T0 + 3 * minute, policy=POLICY,
        ).outcome  # fmt: skip

    assert ingest(timedelta(seconds=5)) is DetectionOutcome.FOLDED  # lost before the reboot: same fault
    assert ingest(3 * minute) is DetectionOutcome.OPENED  # lost again after the reboot: a repeat
