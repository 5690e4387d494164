"""Settings of the recovery service (shared ones keep their names; its own take the RECOVERY_ prefix)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from libs.common.settings import BaseServiceSettings
from services.recovery.domain.incidents import RecoveryPolicy

__all__ = ["RecoverySettings"]


class RecoverySettings(BaseServiceSettings):
    """Settings of the recovery service."""

    model_config = SettingsConfigDict(
        env_prefix="RECOVERY_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "recovery"
    http_port: int = 8006
    deadline_s: float = Field(default=180.0, gt=0, description="Escalate an incident not closed by then.")
    progress_grace_s: float = Field(
        default=30.0,
        ge=0,
        description="Past the deadline, a migrating incident waits while a migration moved this recently.",
    )
    deadline_cap_s: float = Field(
        default=360.0,
        gt=0,
        description="Escalate by then even while migrations progress (at least deadline_s).",
    )
    fold_window_s: float = Field(default=600.0, ge=0, description="Repeats this close fold or escalate.")
    settle_s: float = Field(
        default=10.0,
        ge=0,
        description="Health check: looked at this long after the reset or reboot, then every tick.",
    )
    tick_s: float = Field(default=1.0, gt=0, description="Period of the deadline and settle loop.")
    correlation_window_s: float = Field(
        default=600.0, gt=0, description="Other faults this close in time count as correlated."
    )
    window_s: int = Field(default=120, ge=1, le=3600, description="Telemetry window kept per GPU, s.")
    consume_samples: bool = Field(
        default=True,
        description="Keep the telemetry window: diagnosis, and the health check's readings (without it "
        "the check passes on the settle period alone: for stand-ins that send no samples).",
    )

    @property
    def settle_timedelta(self) -> timedelta:
        """The health check's settle period."""
        return timedelta(seconds=self.settle_s)

    @property
    def policy(self) -> RecoveryPolicy:
        """The incident timing rules these settings describe."""
        return RecoveryPolicy(
            fold_window=timedelta(seconds=self.fold_window_s),
            deadline=timedelta(seconds=self.deadline_s),
            progress_grace=timedelta(seconds=self.progress_grace_s),
            deadline_cap=timedelta(seconds=max(self.deadline_cap_s, self.deadline_s)),
        )
