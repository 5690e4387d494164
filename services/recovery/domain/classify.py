"""Classification: a raw fault signal becomes a fault type with a severity, an owner and an action."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from services.recovery.domain.catalog import Action, FaultCatalog, Owner, Severity

__all__ = ["Classification", "FaultKind", "FaultSignal", "classify"]

EvidenceValue = str | int | float | bool


class FaultKind(StrEnum):
    """What kind of signal telemetry or alerting reported."""

    XID = "xid"
    ECC = "ecc"
    THERMAL = "thermal"
    POWER = "power"
    LOST = "lost"
    AGENT_SILENT = "agent_silent"
    PCIE = "pcie"
    OOM = "oom"


# Non-XID signals map one-to-one onto catalog keys; XIDs are looked up by code.
_KIND_TO_KEY: Mapping[FaultKind, str] = {
    FaultKind.ECC: "ecc_dbe_burst",
    FaultKind.THERMAL: "thermal_runaway",
    FaultKind.POWER: "power_capping",
    FaultKind.LOST: "gpu_lost",
    FaultKind.AGENT_SILENT: "node_agent_silent",
    FaultKind.PCIE: "pcie_saturation",
    FaultKind.OOM: "oom",
}


class FaultSignal(BaseModel):
    """A fault as reported: what, where, when, and the raw evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: FaultKind = Field(description="Kind of fault signal")
    xid: int | None = Field(default=None, ge=0, description="XID code; required when kind is xid")
    gpu: str | None = Field(default=None, description="GPU UUID; None for node-wide faults")
    node: str = Field(min_length=1, description="Node the GPU is in")
    at: AwareDatetime = Field(description="When the fault happened, as observed at the source")
    evidence: Mapping[str, EvidenceValue] = Field(default_factory=dict, description="Raw readings")

    @model_validator(mode="after")
    def _xid_matches_kind(self) -> FaultSignal:
        if (self.kind is FaultKind.XID) != (self.xid is not None):
            raise ValueError("xid is required for kind 'xid' and only for it")
        return self


class Classification(BaseModel):
    """What a signal means for recovery: the catalog's verdict on it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fault_type: str = Field(description="Catalog key, e.g. xid_79")
    severity: Severity
    owner: Owner
    action: Action
    recoverable: bool
    fold_key: str | None = Field(
        default=None, description="Signals with the same fold key fold together (None: the fault type)"
    )

    @property
    def folds_as(self) -> str:
        """The key a repeat must share to fold into an incident of this classification."""
        return self.fold_key or self.fault_type


def classify(signal: FaultSignal, *, catalog: FaultCatalog) -> Classification:
    """Look the signal up in the catalog; unknown XIDs classify as the unknown-XID entry."""
    if signal.kind is FaultKind.XID:
        assert signal.xid is not None  # the model validator guarantees it
        entry = catalog.for_xid(signal.xid)
    else:
        entry = catalog.get(_KIND_TO_KEY[signal.kind])
    return Classification(
        fault_type=entry.key,
        severity=entry.severity,
        owner=entry.owner,
        action=entry.action,
        recoverable=entry.recoverable,
        fold_key=entry.fold_key,
    )
