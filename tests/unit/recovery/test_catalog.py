from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from services.recovery.domain.catalog import Action, FaultCatalog, Owner, Severity, parse_catalog

REQUIRED_XIDS = [8, 13, 31, 43, 45, 46, 48, 54, 62, 63, 64, 74, 79, 92, 94, 95, 109, 119, 120]
REQUIRED_PLATFORM_FAULTS = [
    "ecc_dbe_burst",
    "thermal_runaway",
    "power_capping",
    "gpu_lost",
    "node_agent_silent",
    "pcie_saturation",
    "oom",
]


@pytest.mark.parametrize("xid", REQUIRED_XIDS)
def test_every_required_xid_has_its_own_entry_with_a_source(catalog: FaultCatalog, xid: int) -> None:
    entry = catalog.for_xid(xid)
    assert entry.key == f"xid_{xid}"
    assert entry.xid == xid
    assert entry.description
    assert entry.source.startswith("nvidia-")


@pytest.mark.parametrize("key", REQUIRED_PLATFORM_FAULTS)
def test_every_platform_fault_is_catalogued(catalog: FaultCatalog, key: str) -> None:
    assert catalog.get(key).xid is None


def test_an_unknown_xid_falls_back_to_escalation(catalog: FaultCatalog) -> None:
    entry = catalog.for_xid(999)
    assert entry.key == "xid_unknown"
    assert entry.action is Action.ESCALATE
    assert not entry.recoverable


@pytest.mark.parametrize(
    ("xid", "severity", "owner", "action"),
    [
        (13, Severity.CRITICAL, Owner.APPLICATION, Action.RESTART_WORKLOAD),
        (31, Severity.CRITICAL, Owner.APPLICATION, Action.RESTART_WORKLOAD),
        (45, Severity.INFO, Owner.APPLICATION, Action.IGNORE),
        (48, Severity.FATAL, Owner.MEMORY, Action.DRAIN_AND_RESET),
        (74, Severity.CRITICAL, Owner.INTERCONNECT, Action.DRAIN_AND_RESET),
        (79, Severity.FATAL, Owner.HARDWARE, Action.REBOOT_NODE),
        (95, Severity.FATAL, Owner.MEMORY, Action.DRAIN_AND_RESET),
        (119, Severity.FATAL, Owner.DRIVER, Action.DRAIN_AND_RESET),
    ],
)
def test_well_known_xids_carry_the_policy_nvidia_documents(
    catalog: FaultCatalog, xid: int, severity: Severity, owner: Owner, action: Action
) -> None:
    entry = catalog.for_xid(xid)
    assert (entry.severity, entry.owner, entry.action) == (severity, owner, action)


def test_failing_memory_is_not_returned_to_service_automatically(catalog: FaultCatalog) -> None:
    assert not catalog.for_xid(64).recoverable
    assert not catalog.get("ecc_dbe_burst").recoverable


def _minimal(**fault: Any) -> dict[str, Any]:
    base = {"description": "d", "severity": "warning", "owner": "driver", "action": "escalate"}
    return {
        "sources": {"s": "a source"},
        "faults": {"xid_unknown": base | {"recoverable": False, "source": "s"}, **fault},
    }


def test_a_catalog_entry_citing_an_unknown_source_is_refused() -> None:
    data = _minimal(
        xid_1={
            "description": "d",
            "severity": "info",
            "owner": "driver",
            "action": "ignore",
            "recoverable": True,
            "source": "nowhere",
        }
    )
    with pytest.raises(ValidationError, match="unknown source"):
        parse_catalog(data)


def test_a_catalog_without_the_unknown_xid_fallback_is_refused() -> None:
    with pytest.raises(ValidationError, match="fallback"):
        parse_catalog({"sources": {}, "faults": {}})


def test_a_catalog_entry_with_an_unknown_action_is_refused() -> None:
    data = _minimal(
        xid_1={
            "description": "d",
            "severity": "info",
            "owner": "driver",
            "action": "pray",
            "recoverable": True,
            "source": "s",
        }
    )
    with pytest.raises(ValidationError):
        parse_catalog(data)


def test_xid_79_and_the_gpu_lost_reading_are_one_fault_and_fold_together(catalog: FaultCatalog) -> None:
    assert catalog.get("xid_79").fold_key == catalog.get("gpu_lost").fold_key
    others = {e.fold_key for key, e in catalog.entries.items() if key not in ("xid_79", "gpu_lost")}
    assert catalog.get("xid_79").fold_key not in others
    assert catalog.get("xid_48").fold_key == "xid_48"
