from __future__ import annotations

from datetime import timedelta

from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from services.recovery.domain.detection import Detection, DetectionOutcome, ingest_signal
from services.recovery.domain.incidents import Incident, IncidentState, RecoveryPolicy, record_failure
from tests.unit.recovery.conftest import T0

POLICY = RecoveryPolicy()


def xid(code: int, *, gpu: str | None = "GPU-a", after: timedelta = timedelta(0)) -> FaultSignal:
    return FaultSignal(kind=FaultKind.XID, xid=code, gpu=gpu, node="node-1", at=T0 + after)


def ingest(
    catalog: FaultCatalog, sig: FaultSignal, incidents: list[Incident], new_id: str = "inc-2"
) -> Detection:
    return ingest_signal(
        signal=sig,
        classification=classify(sig, catalog=catalog),
        incidents=incidents,
        workload_ids=["wl-1"],
        incident_id=new_id,
        detected_at=sig.at + timedelta(seconds=2),
        policy=POLICY,
    )


def first_incident(catalog: FaultCatalog, code: int = 48) -> Incident:
    detection = ingest(catalog, xid(code), [], new_id="inc-1")
    assert detection.incident is not None
    return detection.incident


def test_a_new_fault_opens_a_detected_incident_with_its_times(catalog: FaultCatalog) -> None:
    detection = ingest(catalog, xid(48), [], new_id="inc-1")
    assert detection.outcome is DetectionOutcome.OPENED
    incident = detection.incident
    assert incident is not None
    assert (incident.id, incident.state, incident.count) == ("inc-1", IncidentState.DETECTED, 1)
    assert incident.fault_at == T0
    assert incident.detected_at == T0 + timedelta(seconds=2)
    assert incident.workload_ids == ("wl-1",)


def test_a_repeat_on_the_same_gpu_folds_into_the_open_incident(catalog: FaultCatalog) -> None:
    open_one = first_incident(catalog)
    detection = ingest(catalog, xid(48, after=timedelta(minutes=30)), [open_one])
    assert detection.outcome is DetectionOutcome.FOLDED
    assert detection.incident is not None
    assert (detection.incident.id, detection.incident.count) == ("inc-1", 2)
    assert detection.incident.last_seen == T0 + timedelta(minutes=30)


def test_a_repeat_within_the_fold_window_folds_into_a_closed_incident(catalog: FaultCatalog) -> None:
    closed = record_failure(first_incident(catalog), reason="x", at=T0 + timedelta(minutes=1)).incident
    detection = ingest(catalog, xid(48, after=timedelta(minutes=9)), [closed])
    assert detection.outcome is DetectionOutcome.FOLDED
    assert detection.incident is not None
    assert detection.incident.state is IncidentState.ESCALATED


def test_a_repeat_after_the_fold_window_of_a_closed_incident_opens_a_new_one(catalog: FaultCatalog) -> None:
    closed = record_failure(first_incident(catalog), reason="x", at=T0 + timedelta(minutes=1)).incident
    detection = ingest(catalog, xid(48, after=timedelta(minutes=11)), [closed])
    assert detection.outcome is DetectionOutcome.OPENED
    assert detection.incident is not None
    assert detection.incident.id == "inc-2"


def test_a_different_fault_on_the_same_gpu_opens_its_own_incident(catalog: FaultCatalog) -> None:
    detection = ingest(catalog, xid(74, after=timedelta(seconds=5)), [first_incident(catalog)])
    assert detection.outcome is DetectionOutcome.OPENED


def test_the_same_fault_on_another_gpu_opens_its_own_incident(catalog: FaultCatalog) -> None:
    detection = ingest(catalog, xid(48, gpu="GPU-b"), [first_incident(catalog)])
    assert detection.outcome is DetectionOutcome.OPENED


def test_a_late_repeat_does_not_move_last_seen_backwards(catalog: FaultCatalog) -> None:
    later = ingest(catalog, xid(48, after=timedelta(minutes=2)), [first_incident(catalog)]).incident
    assert later is not None
    late = ingest(catalog, xid(48, after=timedelta(minutes=1)), [later]).incident
    assert late is not None
    assert (late.count, late.last_seen) == (3, T0 + timedelta(minutes=2))


def test_node_wide_faults_fold_per_node(catalog: FaultCatalog) -> None:
    silent = FaultSignal(kind=FaultKind.AGENT_SILENT, gpu=None, node="node-1", at=T0)
    opened = ingest(catalog, silent, [], new_id="inc-1").incident
    assert opened is not None
    again = ingest(catalog, silent.model_copy(update={"at": T0 + timedelta(seconds=30)}), [opened])
    assert again.outcome is DetectionOutcome.FOLDED


def test_a_fault_the_catalog_ignores_opens_no_incident(catalog: FaultCatalog) -> None:
    detection = ingest(catalog, xid(45), [])
    assert detection.outcome is DetectionOutcome.IGNORED
    assert detection.incident is None


def _lost(*, gpu: str = "GPU-a", after: timedelta = timedelta(0)) -> FaultSignal:
    return FaultSignal(kind=FaultKind.LOST, gpu=gpu, node="node-1", at=T0 + after)


def test_a_gpu_lost_reading_folds_into_the_open_xid_79_incident_of_its_gpu(catalog: FaultCatalog) -> None:
    xid_79 = first_incident(catalog, code=79)
    detection = ingest(catalog, _lost(after=timedelta(seconds=1)), [xid_79])
    assert detection.outcome is DetectionOutcome.FOLDED
    assert detection.incident is not None
    assert (detection.incident.id, detection.incident.fault_type, detection.incident.count) == (
        "inc-1",
        "xid_79",
        2,
    )


def test_an_xid_79_folds_into_the_open_gpu_lost_incident_of_its_gpu(catalog: FaultCatalog) -> None:
    lost = ingest(catalog, _lost(), [], new_id="inc-1").incident
    assert lost is not None
    assert lost.fault_type == "gpu_lost"
    detection = ingest(catalog, xid(79, after=timedelta(seconds=1)), [lost])
    assert detection.outcome is DetectionOutcome.FOLDED
    assert detection.incident is not None
    assert (detection.incident.id, detection.incident.count) == ("inc-1", 2)


def test_a_gpu_lost_on_another_gpu_or_after_another_fault_opens_its_own_incident(
    catalog: FaultCatalog,
) -> None:
    other_gpu = ingest(catalog, _lost(gpu="GPU-b"), [first_incident(catalog, code=79)])
    assert other_gpu.outcome is DetectionOutcome.OPENED
    other_fault = ingest(catalog, _lost(), [first_incident(catalog, code=48)])
    assert other_fault.outcome is DetectionOutcome.OPENED
