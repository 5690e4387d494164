"""Request and response bodies of telemetry's routes."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from libs.common.events.agent import SimFault, SimProfile
from libs.common.events.telemetry import GpuMetrics
from services.telemetry.adapters.sim import DEFAULT_LEAK_PCT_PER_MIN, SIMULATED_XIDS
from services.telemetry.domain.hints import Hint

__all__ = [
    "CommandAccepted",
    "FaultRequest",
    "GpuHints",
    "HistoryWindow",
    "LatestSample",
    "ProfileRequest",
    "WorkloadHints",
]


class LatestSample(GpuMetrics):
    """A GPU's latest sample with where and when it was taken."""

    node: str = Field(description="Hostname.")
    at: datetime = Field(description="Sampling instant (UTC).")
    fb_used_percent: float | None = Field(
        default=None,
        description="Framebuffer used, %: the old name of fb_used_pct, kept for clients written against it.",
        deprecated="use fb_used_pct, the name alert rules, rollups and exposition use",
    )

    @computed_field(description="Framebuffer used, % (the name alert rules, rollups and exposition use).")  # type: ignore[prop-decorator]
    @property
    def fb_used_pct(self) -> float | None:
        """Framebuffer used as a percentage of total."""
        return super().fb_used_pct


class HistoryWindow(BaseModel):
    """One rollup window of one GPU."""

    window_start: datetime = Field(description="Start of the window (UTC).")
    window_s: float = Field(description="Window length, seconds.")
    node: str = Field(description="Hostname.")
    model: str = Field(description="GPU model.")
    samples: int = Field(description="Samples in the window.")
    workload_id: str | None = Field(description="Workload allocated in the window.")
    tenant_id: str | None = Field(description="Tenant allocated in the window.")
    stats: dict[str, dict[str, float]] = Field(description="metric -> avg, max, p95.")


class GpuHints(BaseModel):
    """Hints for one GPU of a workload."""

    gpu_uuid: str = Field(description="GPU.")
    samples: int = Field(description="Recent samples the rules looked at.")
    hints: list[Hint] = Field(description="Suggestions that apply (empty: none, or too few samples).")


class WorkloadHints(BaseModel):
    """The one-click-optimise suggestions for a running workload."""

    workload_id: str = Field(description="Workload.")
    gpus: list[GpuHints] = Field(description="Per GPU the workload holds.")


class FaultRequest(BaseModel):
    """Inject a fault into a simulated GPU."""

    model_config = ConfigDict(extra="forbid")
    gpu_uuid: str = Field(min_length=1, description="GPU to break.")
    fault: SimFault = Field(description="What to inject.")
    xid: int | None = Field(
        default=None, description=f"With fault=xid: one of {SIMULATED_XIDS} (default 79)."
    )
    leak_pct_per_min: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="With fault=memory_leak: how fast the leak grows, in % of the card's memory per "
        f"simulated minute (default {DEFAULT_LEAK_PCT_PER_MIN}: 90% to the OOM at 100% in 8 minutes).",
    )

    @model_validator(mode="after")
    def _xid_fits(self) -> FaultRequest:
        if self.xid is not None and self.fault != "xid":
            raise ValueError("xid is only for fault 'xid'")
        if self.xid is not None and self.xid not in SIMULATED_XIDS:
            raise ValueError(f"xid must be one of {SIMULATED_XIDS}")
        if self.leak_pct_per_min is not None and self.fault != "memory_leak":
            raise ValueError("leak_pct_per_min is only for fault 'memory_leak'")
        return self


class ProfileRequest(BaseModel):
    """Change how a simulated workload uses its GPUs."""

    model_config = ConfigDict(extra="forbid")
    workload_id: str = Field(min_length=1, description="Workload to change.")
    profile: SimProfile = Field(description="training, inference or interactive.")


class CommandAccepted(BaseModel):
    """The command was published for the agents."""

    command_id: str = Field(description="Id of the command event.")
    event_id: str = Field(description="Id of its envelope.")
