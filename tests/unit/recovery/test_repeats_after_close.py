"""A fault seen again after its incident closed opens a new incident unless the GPU is still held out."""

from __future__ import annotations

from datetime import timedelta

from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from services.recovery.domain.detection import Detection, DetectionOutcome, ingest_signal
from services.recovery.domain.incidents import (
    Incident,
    IncidentState,
    RecoveryPolicy,
    check_deadline,
    drain_completed,
    record_health_check,
    record_progress,
    start_diagnosis,
    start_remediation,
)
from services.recovery.domain.workload_moves import MigrationPhase
from tests.unit.recovery.conftest import T0

S = timedelta(seconds=1)
POLICY = RecoveryPolicy()


def _lost(second: int) -> FaultSignal:
    return FaultSignal(kind=FaultKind.LOST, gpu="g1", node="n1", at=T0 + second * S)


def _ingest(
    catalog: FaultCatalog, signal: FaultSignal, incidents: list[Incident], *, out_of_service: bool
) -> Detection:
    return ingest_signal(
        signal=signal,
        classification=classify(signal, catalog=catalog),
        incidents=incidents,
        workload_ids=[],
        incident_id="inc-2",
        detected_at=signal.at + S,
        policy=POLICY,
        out_of_service=out_of_service,
    )


def _migrating(catalog: FaultCatalog) -> Incident:
    opened = _ingest(
        catalog, FaultSignal(kind=FaultKind.XID, xid=79, gpu="g1", node="n1", at=T0), [], out_of_service=False
    )
    assert opened.incident is not None
    first = opened.incident.model_copy(update={"id": "inc-1", "workload_ids": ("w1",)})
    draining = start_remediation(
        start_diagnosis(first, at=T0 + 2 * S).incident, diagnosis=None, at=T0 + 3 * S
    )
    return drain_completed(draining.incident, at=T0 + 4 * S).incident


def _resolved(catalog: FaultCatalog) -> Incident:
    moved = record_progress(
        _migrating(catalog), workload_id="w1", phase=MigrationPhase.RUNNING, percent=100, at=T0 + 10 * S
    )
    resolved = record_health_check(moved.incident, passed=True, at=T0 + 30 * S).incident
    assert resolved.state is IncidentState.RESOLVED
    return resolved


def _escalated_holding_the_gpu(catalog: FaultCatalog) -> Incident:
    escalated = check_deadline(_migrating(catalog), now=T0 + 200 * S, policy=POLICY).incident
    assert escalated.state is IncidentState.ESCALATED
    return escalated


def test_the_gpu_lost_again_after_its_incident_resolved_opens_a_repeat(catalog: FaultCatalog) -> None:
    detection = _ingest(catalog, _lost(60), [_resolved(catalog)], out_of_service=False)
    assert detection.outcome is DetectionOutcome.OPENED
    assert detection.incident is not None
    assert detection.incident.repeat_of == "inc-1"


def test_the_gpu_lost_after_a_person_returned_it_opens_a_new_incident(catalog: FaultCatalog) -> None:
    detection = _ingest(catalog, _lost(260), [_escalated_holding_the_gpu(catalog)], out_of_service=False)
    assert detection.outcome is DetectionOutcome.OPENED
    assert detection.incident is not None
    assert (detection.incident.id, detection.incident.repeat_of) == ("inc-2", "inc-1")


def test_the_gpu_lost_while_its_escalated_incident_holds_it_out_of_service_folds(
    catalog: FaultCatalog,
) -> None:
    detection = _ingest(catalog, _lost(260), [_escalated_holding_the_gpu(catalog)], out_of_service=True)
    assert detection.outcome is DetectionOutcome.FOLDED
    assert detection.incident is not None
    assert (detection.incident.id, detection.incident.count) == ("inc-1", 2)


def test_a_late_report_from_before_the_escalation_folds_even_with_the_gpu_back(catalog: FaultCatalog) -> None:
    detection = _ingest(catalog, _lost(150), [_escalated_holding_the_gpu(catalog)], out_of_service=False)
    assert detection.outcome is DetectionOutcome.FOLDED
