"""The incident list shows migration progress as the detail does (issue 17: lists omitted it)."""

from __future__ import annotations

from services.recovery.api.schemas import detail, summary
from services.recovery.domain.catalog import FaultCatalog
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from services.recovery.domain.detection import open_incident
from services.recovery.domain.incidents import Incident
from services.recovery.domain.workload_moves import Migration, MigrationPhase
from tests.unit.recovery.conftest import T0


def _moving(catalog: FaultCatalog) -> Incident:
    signal = FaultSignal(kind=FaultKind.XID, xid=48, gpu="g1", node="n1", at=T0)
    opened = open_incident(
        incident_id="inc-1",
        signal=signal,
        classification=classify(signal, catalog=catalog),
        workload_ids=("wa", "wb"),
        detected_at=T0,
    )
    migrations = (
        Migration(workload_id="wa", phase=MigrationPhase.RUNNING, percent=100),
        Migration(workload_id="wb", phase=MigrationPhase.TRANSFER, percent=40),
    )
    return opened.model_copy(update={"migrations": migrations})


def test_the_list_shows_the_progress_the_caller_may_see(catalog: FaultCatalog) -> None:
    incident = _moving(catalog)
    tenants: dict[str, str | None] = {"wa": "acme", "wb": "beta"}
    assert summary(incident).progress_percent == 70
    assert summary(incident, workload_tenants=tenants, tenant="beta").progress_percent == 40
    assert summary(incident, workload_tenants=tenants, tenant="gamma").progress_percent is None
    shown = detail(incident, workload_tenants=tenants, tenant="beta")
    assert (shown.progress_percent, [m.workload_id for m in shown.migrations]) == (40, ["wb"])


def test_an_incident_without_migrations_has_no_progress(catalog: FaultCatalog) -> None:
    incident = _moving(catalog).model_copy(update={"migrations": ()})
    assert summary(incident).progress_percent is None
    assert "progress_percent" in summary(incident).model_dump()
