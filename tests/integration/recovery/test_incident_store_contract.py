"""One contract for the incidents recovery's use cases save and read: FakeIncidentStore and IncidentStore."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from services.recovery.adapters.catalog_loader import load_catalog
from services.recovery.adapters.unit_of_work import PostgresRecoveryUnitOfWork
from services.recovery.adapters.unit_of_work_fake import FakeRecoveryUnitOfWork
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from services.recovery.domain.host_actions import HostActionResult
from services.recovery.domain.incidents import Incident, IncidentState
from services.recovery.service.unit_of_work import IncidentBook
from tests.integration.store_contract import Units, fake_units, service_pool, sql_units
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
_CLASSIFIED = classify(
    FaultSignal(kind=FaultKind.XID, xid=48, gpu="g1", node="n1", at=T0), catalog=load_catalog()
)


@pytest.fixture(params=["fake", "postgres"])
async def units(request: pytest.FixtureRequest, isolation: Isolation) -> AsyncIterator[Units[IncidentBook]]:
    if request.param == "fake":
        yield fake_units(FakeRecoveryUnitOfWork(), lambda uow: uow.incidents)
        return
    async with service_pool(isolation, "recovery") as pool:
        yield sql_units(pool, PostgresRecoveryUnitOfWork, lambda uow: uow.incidents)


def incident(
    iid: str,
    *,
    state: IncidentState,
    node: str = "n1",
    gpu: str | None = "g1",
    at: int = 0,
    closed: int | None = None,
    workloads: tuple[str, ...] = (),
) -> Incident:
    """An incident detected ``at`` seconds after T0 (and last seen then), closed ``closed`` seconds after."""
    return Incident(
        id=iid, classification=_CLASSIFIED, gpu=gpu, node=node, state=state, fault_at=T0 + at * S,
        detected_at=T0 + at * S, last_seen=T0 + at * S, workload_ids=workloads,
        closed_at=None if closed is None else T0 + closed * S,
    )  # fmt: skip


async def test_an_incident_is_read_back_whole_by_id_and_a_rolled_back_save_is_not_kept(
    units: Units[IncidentBook],
) -> None:
    done = HostActionResult(
        command_id="i1:reset_gpu:5", action="reset_gpu", outcome="failed", node="n1", gpu="g1",
        commands=(("nvidia-smi", "--gpu-reset", "-i", "g1"),), exit_code=3, output="busy", at=T0 + 9 * S,
    )  # fmt: skip
    saved = incident("i1", state=IncidentState.VERIFYING, workloads=("w1",)).model_copy(
        update={"actions": (done,)}
    )
    async with units() as book:
        await book.lock_node("n1")
        await book.save(saved, tenants={"w1": "acme"})
    async with units.rolled_back() as book:
        await book.save(incident("i2", state=IncidentState.DRAINING), tenants={})
    async with units() as book:
        assert await book.get("i1") == saved
        assert await book.get("i2") is None
        assert await book.get("unknown") is None


async def test_node_queries_filter_by_state_and_keep_their_order(units: Units[IncidentBook]) -> None:
    old_resolved = incident("a-res", state=IncidentState.RESOLVED, at=0, closed=5)
    draining = incident("b-drn", state=IncidentState.DRAINING, at=10)
    verifying = incident("c-ver", state=IncidentState.VERIFYING, at=20)
    esc_early = incident("d-esc", state=IncidentState.ESCALATED, at=1, closed=30)
    esc_late = incident("e-esc", state=IncidentState.ESCALATED, at=2, closed=40)
    elsewhere = incident("f-n2", state=IncidentState.DRAINING, node="n2", at=3)
    async with units() as book:
        for i in (old_resolved, draining, verifying, esc_early, esc_late, elsewhere):
            await book.save(i, tenants={})
    async with units() as book:
        drained = IncidentState.DRAINING, IncidentState.VERIFYING
        assert await book.open_in_state("n1", *drained) == [draining, verifying]
        assert await book.open_in_state("n1", IncidentState.MIGRATING) == []
        assert await book.escalated_on_node("n1") == [esc_late, esc_early]
        assert await book.escalated_on_node("n1", limit=1) == [esc_late]
        # Open ones, and closed ones last seen since the cut-off, newest first.
        assert await book.recent_on_node("n1", since=T0 + 1 * S) == [verifying, draining, esc_late, esc_early]


async def test_gpus_are_held_by_open_and_escalated_incidents_only(units: Units[IncidentBook]) -> None:
    async with units() as book:
        await book.save(incident("i-open", state=IncidentState.MIGRATING, gpu="g1"), tenants={})
        await book.save(incident("i-esc", state=IncidentState.ESCALATED, gpu="g2", closed=50), tenants={})
        await book.save(incident("i-res", state=IncidentState.RESOLVED, gpu="g3", closed=50), tenants={})
        await book.save(incident("i-node", state=IncidentState.DRAINING, gpu=None), tenants={})
    async with units() as book:
        assert await book.held_gpus("n1", other_than="i-open") == {"g2"}
        assert await book.held_gpus("n1", other_than="none") == {"g1", "g2"}
        assert await book.others_holding_gpu("g2", other_than="x", since=T0 + 50 * S) == ["i-esc"]
        assert await book.others_holding_gpu("g2", other_than="x", since=T0 + 51 * S) == []
        assert await book.others_holding_gpu("g1", other_than="i-open", since=T0) == []
        assert await book.others_holding_gpu("g3", other_than="x", since=T0) == []


async def test_due_incidents_and_the_settle_instant_kept_only_while_verifying(
    units: Units[IncidentBook],
) -> None:
    verifying = incident("v", state=IncidentState.VERIFYING, at=5, workloads=("w1",))
    migrating = incident("m", state=IncidentState.MIGRATING, at=1, workloads=("w1", "w2"))
    async with units() as book:
        await book.save(verifying, tenants={"w1": "acme"}, settle_until=T0 + 20 * S)
        await book.save(migrating, tenants={})
        await book.save(incident("r", state=IncidentState.RESOLVED, at=0, closed=4), tenants={})
    async with units() as book:
        await book.save(verifying, tenants={})  # saved again without one: the settle instant stays
    async with units() as book:
        assert await book.migrating_for("w2") == [migrating]
        assert await book.migrating_for("w9") == []
        assert await book.due_deadline(detected_before=T0 + 5 * S) == [migrating, verifying]
        assert await book.due_deadline(detected_before=T0 + 2 * S) == [migrating]
        assert await book.due_settle(now=T0 + 19 * S) == []
        assert await book.due_settle(now=T0 + 20 * S) == [verifying]
        await book.save(verifying.model_copy(update={"state": IncidentState.ESCALATED}), tenants={})
    async with units() as book:
        assert await book.due_settle(now=T0 + 99 * S) == []
