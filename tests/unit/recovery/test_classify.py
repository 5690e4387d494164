from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError

from services.recovery.domain.catalog import Action, FaultCatalog, Owner, Severity
from services.recovery.domain.classify import FaultKind, FaultSignal, classify
from tests.unit.recovery.conftest import T0


def signal(kind: FaultKind, *, xid: int | None = None, gpu: str | None = "GPU-a") -> FaultSignal:
    return FaultSignal(kind=kind, xid=xid, gpu=gpu, node="node-1", at=T0)


def test_an_xid_is_classified_by_its_code(catalog: FaultCatalog) -> None:
    result = classify(signal(FaultKind.XID, xid=79), catalog=catalog)
    assert result.fault_type == "xid_79"
    assert result.severity is Severity.FATAL
    assert result.action is Action.REBOOT_NODE
    assert result.recoverable


def test_an_unknown_xid_is_classified_for_escalation(catalog: FaultCatalog) -> None:
    result = classify(signal(FaultKind.XID, xid=4242), catalog=catalog)
    assert (result.fault_type, result.action) == ("xid_unknown", Action.ESCALATE)


@pytest.mark.parametrize(
    ("kind", "fault_type", "action"),
    [
        (FaultKind.ECC, "ecc_dbe_burst", Action.DRAIN_AND_RESET),
        (FaultKind.THERMAL, "thermal_runaway", Action.DRAIN_AND_RESET),
        (FaultKind.POWER, "power_capping", Action.IGNORE),
        (FaultKind.LOST, "gpu_lost", Action.REBOOT_NODE),
        (FaultKind.AGENT_SILENT, "node_agent_silent", Action.ESCALATE),
        (FaultKind.PCIE, "pcie_saturation", Action.IGNORE),
        (FaultKind.OOM, "oom", Action.RESTART_WORKLOAD),
    ],
)
def test_each_non_xid_signal_kind_maps_to_its_catalog_entry(
    catalog: FaultCatalog, kind: FaultKind, fault_type: str, action: Action
) -> None:
    result = classify(signal(kind), catalog=catalog)
    assert (result.fault_type, result.action) == (fault_type, action)


def test_an_application_fault_is_owned_by_the_application(catalog: FaultCatalog) -> None:
    assert classify(signal(FaultKind.XID, xid=13), catalog=catalog).owner is Owner.APPLICATION


def test_an_xid_signal_without_a_code_is_rejected() -> None:
    with pytest.raises(ValidationError, match="xid is required"):
        FaultSignal(kind=FaultKind.XID, gpu="GPU-a", node="n", at=T0)


def test_a_non_xid_signal_with_a_code_is_rejected() -> None:
    with pytest.raises(ValidationError, match="xid is required"):
        FaultSignal(kind=FaultKind.OOM, xid=31, gpu="GPU-a", node="n", at=T0)


def test_a_signal_with_a_naive_timestamp_is_rejected() -> None:
    with pytest.raises(ValidationError):
        FaultSignal(kind=FaultKind.OOM, gpu="GPU-a", node="n", at=datetime(2025, 1, 1))


def test_a_signal_round_trips_through_json() -> None:
    original = FaultSignal(kind=FaultKind.XID, xid=48, gpu="GPU-a", node="n", at=T0, evidence={"dbe": 3})
    assert FaultSignal.model_validate_json(original.model_dump_json()) == original
