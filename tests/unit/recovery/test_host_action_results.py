"""What recovery does with the host's report of the reset or reboot it asked for (HostActionDoneV1)."""

from __future__ import annotations

from typing import Literal

from libs.common.events.agent import HostActionDoneV1, HostActionRequestedV1
from libs.common.events.recovery import IncidentClosedV1, ReturnToServiceRequestedV1
from libs.common.testing import handler_context
from services.recovery.adapters.unit_of_work_fake import FakeRecoveryUnitOfWork
from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind
from services.recovery.domain.incidents import IncidentState, drain_completed
from services.recovery.service.effects import Effects, apply
from services.recovery.service.handlers import RecoveryDeps, on_host_action_done
from services.recovery.settings import RecoverySettings
from tests.unit.recovery.conftest import T0
from tests.unit.recovery.test_incidents import S, diagnosed, incident, run_migration

Outcome = Literal["succeeded", "failed", "refused"]
NOW = T0 + 30 * S


def _deps(catalog: FaultCatalog) -> RecoveryDeps:
    return RecoveryDeps(settings=RecoverySettings(), catalog=catalog, clock=lambda: NOW)


async def _verifying(catalog: FaultCatalog, uow: FakeRecoveryUnitOfWork) -> HostActionRequestedV1:
    """XID 48 on GPU-a: drained, wl-1 moved, the reset asked for; returns the request sent to the host."""
    draining = diagnosed(incident(catalog, FaultKind.XID, 48)).incident
    verifying = run_migration(drain_completed(draining, at=T0 + 4 * S).incident, "wl-1", start=5)
    async with uow:
        await apply(uow, verifying, before=None, fx=Effects(settle=5 * S, now=T0 + 8 * S))
        await uow.commit()
    asked = [e for e in uow.events if isinstance(e, HostActionRequestedV1)]
    assert [(a.action, a.gpu_uuid) for a in asked] == [("reset_gpu", "GPU-a")]
    return asked[0]


def _done(asked: HostActionRequestedV1, outcome: Outcome, **fields: object) -> HostActionDoneV1:
    values: dict[str, object] = {
        "command_id": asked.command_id,
        "incident_id": asked.incident_id,
        "node": asked.node,
        "gpu_uuid": asked.gpu_uuid,
        "action": asked.action,
        "outcome": outcome,
    }
    return HostActionDoneV1.model_validate(values | fields)


async def _deliver(event: HostActionDoneV1, uow: FakeRecoveryUnitOfWork, catalog: FaultCatalog) -> None:
    async with uow:
        await on_host_action_done(event, handler_context(event, uow=uow, deps=_deps(catalog)))
        await uow.commit()


async def test_a_failed_reset_escalates_at_once_with_the_action_gpu_exit_status_and_first_output_line(
    catalog: FaultCatalog,
) -> None:
    uow = FakeRecoveryUnitOfWork()
    asked = await _verifying(catalog, uow)
    failed = _done(
        asked,
        "failed",
        reason="command exited 3",
        commands=[["nvidia-smi", "--gpu-reset", "-i", "GPU-a"]],
        exit_code=3,
        output="\nUnable to reset GPU GPU-a: In use by another client\nsecond line\n",
    )

    await _deliver(failed, uow, catalog)

    shown = await uow.incidents.get("inc-1")
    assert shown is not None
    assert shown.state is IncidentState.ESCALATED
    reason = shown.escalation_reason or ""
    assert reason.startswith("reset_gpu of GPU GPU-a on node node-1 failed (exit status 3)")
    assert "Unable to reset GPU GPU-a: In use by another client" in reason
    assert "second line" not in reason
    assert [a.commands for a in shown.actions] == [(("nvidia-smi", "--gpu-reset", "-i", "GPU-a"),)]
    closed = [e for e in uow.events if isinstance(e, IncidentClosedV1)]
    assert [(c.outcome, c.reason) for c in closed] == [("escalated", reason)]
    assert not any(isinstance(e, ReturnToServiceRequestedV1) for e in uow.events)


async def test_a_refused_reset_escalates_naming_why_the_host_refused(catalog: FaultCatalog) -> None:
    uow = FakeRecoveryUnitOfWork()
    asked = await _verifying(catalog, uow)

    await _deliver(_done(asked, "refused", reason="GPU busy: workload w9"), uow, catalog)

    shown = await uow.incidents.get("inc-1")
    assert shown is not None
    assert shown.state is IncidentState.ESCALATED
    assert shown.escalation_reason == (
        "reset_gpu of GPU GPU-a on node node-1 refused (no exit status): GPU busy: workload w9; no output"
    )


async def test_a_succeeded_reset_is_recorded_with_its_output_and_the_health_check_still_decides(
    catalog: FaultCatalog,
) -> None:
    uow = FakeRecoveryUnitOfWork()
    asked = await _verifying(catalog, uow)
    before = len(uow.events)
    done = _done(
        asked,
        "succeeded",
        commands=[["nvidia-smi", "--gpu-reset", "-i", "GPU-a"]],
        exit_code=0,
        output="ok\n",
    )

    await _deliver(done, uow, catalog)
    await _deliver(done, uow, catalog)  # delivered again: recorded once

    shown = await uow.incidents.get("inc-1")
    assert shown is not None
    assert shown.state is IncidentState.VERIFYING
    assert [(a.command_id, a.outcome, a.exit_code, a.output) for a in shown.actions] == [
        (asked.command_id, "succeeded", 0, "ok\n")
    ]
    assert uow.events[before:] == []


async def test_the_result_of_an_action_that_is_not_the_latest_asked_changes_nothing(
    catalog: FaultCatalog,
) -> None:
    uow = FakeRecoveryUnitOfWork()
    asked = await _verifying(catalog, uow)
    before, count = await uow.incidents.get("inc-1"), len(uow.events)
    stale = _done(asked, "failed", command_id="inc-1:reset_gpu:2", exit_code=1, output="old reset")

    await _deliver(stale, uow, catalog)

    assert await uow.incidents.get("inc-1") == before
    assert len(uow.events) == count


async def test_the_result_for_an_unknown_incident_changes_nothing(catalog: FaultCatalog) -> None:
    uow = FakeRecoveryUnitOfWork()
    asked = await _verifying(catalog, uow)
    count = len(uow.events)
    other = _done(asked, "failed", incident_id="inc-gone", command_id="inc-gone:reset_gpu:5")

    await _deliver(other, uow, catalog)

    shown = await uow.incidents.get("inc-1")
    assert shown is not None
    assert shown.state is IncidentState.VERIFYING
    assert shown.actions == ()
    assert len(uow.events) == count


async def test_a_failed_reset_heard_after_the_incident_closed_changes_nothing(catalog: FaultCatalog) -> None:
    uow = FakeRecoveryUnitOfWork()
    asked = await _verifying(catalog, uow)
    await _deliver(_done(asked, "failed", exit_code=1), uow, catalog)
    closed = await uow.incidents.get("inc-1")
    count = len(uow.events)

    await _deliver(_done(asked, "failed", exit_code=2, output="again"), uow, catalog)

    assert await uow.incidents.get("inc-1") == closed
    assert len(uow.events) == count
