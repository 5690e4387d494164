"""Settings of the billing service (shared ones keep their names; its own take the BILLING_ prefix)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from libs.common.settings import BaseServiceSettings
from services.billing.domain.idle import IdlePolicy
from services.billing.domain.sla import DEFAULT_POLICY, MAX_CREDIT_RATE, FaultClass, SlaPolicy

__all__ = ["BillingSettings"]


class BillingSettings(BaseServiceSettings):
    """Settings of the billing service."""

    model_config = SettingsConfigDict(
        env_prefix="BILLING_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "billing"
    http_port: int = 8005
    accrual_interval_s: float = Field(default=60.0, gt=0, description="How often open allocations accrue.")
    accrual_batch: int = Field(default=200, ge=1, description="Allocations rated per accrual transaction.")
    accrual_max_span_h: float = Field(
        default=24.0,
        gt=0,
        description="Most hours one allocation is rated in one pass (catch-up is gradual).",
    )
    rating_interval_s: int = Field(default=60, ge=1, description="Charge-line grid, seconds.")
    idle_threshold_pct: float = Field(default=5.0, ge=0, le=100, description="Below this SM util = idle.")
    idle_after_s: float = Field(default=72 * 3600, gt=0, description="Idle time before the warning.")
    idle_grace_s: float = Field(default=24 * 3600, ge=0, description="Time after the warning before release.")
    idle_max_gap_s: float = Field(default=300, gt=0, description="A telemetry gap longer than this resets.")
    usage_half_life_h: float = Field(default=168.0, gt=0, description="Fair-share decay half-life, hours.")
    usage_publish_interval_s: float = Field(default=300.0, gt=0, description="UsageDecayedV1 period.")
    export_dir: str | None = Field(default=None, description="Daily exports go here; unset disables them.")
    export_check_interval_s: float = Field(default=3600.0, gt=0, description="Daily-export loop period.")
    spot_window_days: int = Field(default=30, ge=1, le=366, description="History window of spot advice.")
    sla_fault_classes: list[FaultClass] = Field(
        default=sorted(DEFAULT_POLICY.fault_classes),
        description="Default SLA policy: the fault classes (recovery catalog owners) that are credited.",
    )
    sla_credit_rate: Decimal = Field(
        default=DEFAULT_POLICY.credit_rate,
        ge=0,
        le=MAX_CREDIT_RATE,
        description="Default SLA policy: fraction of the lost time's charge credited (1 = all of it).",
    )
    sla_monthly_cap_micro: int = Field(
        default=DEFAULT_POLICY.monthly_cap_micro,
        ge=0,
        description="Default SLA policy: most micro-units credited to a tenant per calendar month.",
    )

    @property
    def rating_interval(self) -> timedelta:
        """The charge-line grid."""
        return timedelta(seconds=self.rating_interval_s)

    @property
    def sla_policy(self) -> SlaPolicy:
        """The SLA policy of a tenant without its own."""
        return SlaPolicy(
            fault_classes=frozenset(self.sla_fault_classes),
            credit_rate=self.sla_credit_rate,
            monthly_cap_micro=self.sla_monthly_cap_micro,
        )

    @property
    def idle_policy(self) -> IdlePolicy:
        """The idle-reclaim policy these settings describe."""
        return IdlePolicy(
            threshold_pct=self.idle_threshold_pct,
            idle_after=timedelta(seconds=self.idle_after_s),
            grace=timedelta(seconds=self.idle_grace_s),
            max_gap=timedelta(seconds=self.idle_max_gap_s),
        )
