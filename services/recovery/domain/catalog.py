"""The fault catalog: what each XID or platform fault means and what recovery does first."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.recovery.domain.correlate import Cause, Finding

__all__ = [
    "CATALOG_CONFIDENCE",
    "UNKNOWN_XID",
    "Action",
    "FaultCatalog",
    "FaultEntry",
    "Owner",
    "Severity",
    "catalog_finding",
    "parse_catalog",
    "xid_key",
]

UNKNOWN_XID = "xid_unknown"
#: Confidence of the catalog's cause: what the fault means is known, but any telemetry finding about why
#: it happened (every rule starts above 0.5) outweighs it.
CATALOG_CONFIDENCE = 0.5


class Severity(StrEnum):
    """How bad a fault is for the workloads on the GPU."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"
    FATAL = "fatal"


class Owner(StrEnum):
    """Who most likely caused the fault, and so who should look at it."""

    APPLICATION = "application"
    DRIVER = "driver"
    HARDWARE = "hardware"
    INTERCONNECT = "interconnect"
    MEMORY = "memory"
    THERMAL = "thermal"


class Action(StrEnum):
    """The first thing recovery does about a fault."""

    IGNORE = "ignore"
    RESTART_WORKLOAD = "restart_workload"
    RESET_GPU = "reset_gpu"
    DRAIN_AND_RESET = "drain_and_reset"
    REBOOT_NODE = "reboot_node"
    ESCALATE = "escalate"


class FaultEntry(BaseModel):
    """One catalog row: a fault type and the policy for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(description="Fault type key, e.g. xid_79 or gpu_lost")
    xid: int | None = Field(default=None, description="NVIDIA XID code, when the fault is an XID")
    description: str = Field(description="What the fault means, in one line")
    severity: Severity = Field(description="How bad it is for the workloads on the GPU")
    owner: Owner = Field(description="Likely cause")
    action: Action = Field(description="Immediate action")
    recoverable: bool = Field(description="Whether the GPU may return to service without a person")
    source: str = Field(description="Key into the catalog's sources")
    note: str = Field(default="", description="Why the policy is what it is")
    fold_group: str | None = Field(
        default=None,
        description="Fault types sharing a group are one fault seen by several signals: they fold together",
    )
    cause: Cause | None = Field(
        default=None,
        description="The probable cause the fault itself names (XID 79: the GPU fell off the bus), when "
        "the telemetry window shows none",
    )

    @property
    def fold_key(self) -> str:
        """What repeats must share to fold into one incident: the fold group, else the fault type."""
        return self.fold_group or self.key


class FaultCatalog(BaseModel):
    """All known faults by key, with the sources they were taken from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sources: Mapping[str, str]
    entries: Mapping[str, FaultEntry]

    @model_validator(mode="after")
    def _consistent(self) -> FaultCatalog:
        # A catalog without the fallback row could not classify a new XID, so refuse it at load time.
        if UNKNOWN_XID not in self.entries:
            raise ValueError(f"catalog lacks the {UNKNOWN_XID} fallback entry")
        for entry in self.entries.values():
            if entry.source not in self.sources:
                raise ValueError(f"{entry.key}: unknown source {entry.source!r}")
        return self

    def get(self, key: str) -> FaultEntry:
        """The entry for a fault type key; KeyError names the key when it is unknown."""
        return self.entries[key]

    def for_xid(self, xid: int) -> FaultEntry:
        """The entry for an XID code, falling back to the unknown-XID entry."""
        return self.entries.get(xid_key(xid), self.entries[UNKNOWN_XID])


def catalog_finding(entry: FaultEntry) -> Finding | None:
    """The catalog's own account of a fault as a finding, for entries that name a cause."""
    if entry.cause is None:
        return None
    return Finding(
        rule="fault_catalog",
        cause=entry.cause,
        confidence=CATALOG_CONFIDENCE,
        evidence={"fault_type": entry.key, "description": entry.description, "source": entry.source},
    )


def xid_key(xid: int) -> str:
    """The fault type key of an XID code."""
    return f"xid_{xid}"


def parse_catalog(data: Mapping[str, Any]) -> FaultCatalog:
    """Build a catalog from the YAML document's mapping (sources + faults)."""
    faults: Mapping[str, Mapping[str, Any]] = data["faults"]
    entries = {key: FaultEntry(key=key, **fields) for key, fields in faults.items()}
    return FaultCatalog(sources=dict(data["sources"]), entries=entries)
