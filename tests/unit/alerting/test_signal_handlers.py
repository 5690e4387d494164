from __future__ import annotations

from datetime import UTC, datetime

from libs.common.events.recovery import IncidentClosedV1
from libs.common.events.telemetry import FaultSignaledV1
from libs.common.testing import handler_context
from services.alerting.adapters.engine_state_store_fake import FakeStateStore
from services.alerting.adapters.unit_of_work_fake import FakeAlertingUnitOfWork
from services.alerting.domain.signals import Signal, SignalKind
from services.alerting.service.handlers import on_fault_signaled, on_incident_closed

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


async def _deliver(
    event: IncidentClosedV1 | FaultSignaledV1, store: FakeStateStore, *, commit: bool = True
) -> None:
    uow = FakeAlertingUnitOfWork(store)
    async with uow:
        ctx = handler_context(event, uow=uow, deps=None, time=T0)
        if isinstance(event, IncidentClosedV1):
            await on_incident_closed(event, ctx)
        else:
            await on_fault_signaled(event, ctx)
        if commit:
            await uow.commit()


async def test_an_escalated_incident_queues_a_critical_signal_at_the_time_it_closed() -> None:
    store = FakeStateStore()

    await _deliver(IncidentClosedV1(incident_id="inc-1", outcome="escalated", reason="no spare GPU"), store)

    assert [(s.name, s.labels, s.severity, s.at) for s in store.signals] == [
        ("IncidentEscalated", {"incident": "inc-1"}, "critical", T0)
    ]


async def test_a_recovered_incident_queues_nothing() -> None:
    store = FakeStateStore()

    await _deliver(IncidentClosedV1(incident_id="inc-1", outcome="recovered", seconds_to_recover=42.0), store)

    assert store.signals == []


async def test_a_lost_gpu_feeds_the_gpu_lost_gauge_rather_than_an_alert_of_its_own() -> None:
    store = FakeStateStore()
    event = FaultSignaledV1(fault_id="f1", kind="lost", gpu_uuid="GPU-1", node="node-a", at=T0)

    await _deliver(event, store)

    assert store.signals == [
        Signal(
            kind=SignalKind.GPU_LOST,
            name="GpuLost",
            labels={"node": "node-a", "fault": "lost", "gpu": "GPU-1"},
            at=T0,
        )
    ]


async def test_a_signal_queued_by_a_delivery_that_fails_before_its_commit_is_not_kept() -> None:
    store = FakeStateStore()
    await _deliver(IncidentClosedV1(incident_id="inc-1", outcome="escalated", reason="no spare GPU"), store)

    lost = FaultSignaledV1(fault_id="f1", kind="lost", gpu_uuid="GPU-1", node="node-a", at=T0)
    await _deliver(lost, store, commit=False)

    assert [s.name for s in store.signals] == ["IncidentEscalated"]
