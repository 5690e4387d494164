"""Request bodies of the billing API."""

from __future__ import annotations

from datetime import date, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.billing.adapters.export_queries import ExportFormat
from services.billing.domain.budgets import DEFAULT_THRESHOLDS
from services.billing.domain.prices import PriceBasis, PricingClass

__all__ = ["BudgetIn", "PriceIn", "ScheduleIn", "TagPolicyIn", "TenantTagsIn"]


class ScheduleIn(BaseModel):
    """A daily export of one project."""

    model_config = ConfigDict(extra="forbid")

    format: ExportFormat = Field(default="parquet", description="csv, jsonl or parquet.")
    first_day: date | None = Field(default=None, description="First UTC day to export; default yesterday.")
    tenant_id: str | None = Field(default=None, description="Admins: the tenant to act for.")


class PriceIn(BaseModel):
    """A new price version; it may not take effect in the past."""

    model_config = ConfigDict(extra="forbid")

    price_id: str = Field(min_length=1, max_length=200)
    gpu_model: str = Field(min_length=1, max_length=100, description="Catalog model, or 'default'.")
    mig_profile: str | None = Field(default=None, max_length=50)
    share_of: int | None = Field(default=None, ge=2, le=64)
    pricing_class: PricingClass
    basis: PriceBasis
    micro_per_hour: int = Field(ge=0, description="Micro-currency per basis-unit-hour.")
    effective_from: datetime
    effective_to: datetime | None = None


class BudgetIn(BaseModel):
    """A project's monthly budget."""

    model_config = ConfigDict(extra="forbid")

    limit_micro: int = Field(gt=0, description="Monthly limit, micro-currency.")
    thresholds: list[int] = Field(default=list(DEFAULT_THRESHOLDS), min_length=1, max_length=10)
    hard_stop: bool = Field(default=False, description="At 100% ask the scheduler to refuse new work.")
    tenant_id: str | None = Field(default=None, description="Admins: the tenant to act for.")

    @field_validator("thresholds")
    @classmethod
    def _percentages(cls, value: list[int]) -> list[int]:
        if any(t <= 0 or t > 1000 for t in value):
            raise ValueError("thresholds are percentages between 1 and 1000")
        return sorted(set(value))


class TagPolicyIn(BaseModel):
    """Tag keys every workload of the tenant must carry."""

    model_config = ConfigDict(extra="forbid")

    required: list[str] = Field(max_length=50)
    tenant_id: str | None = None

    @field_validator("required")
    @classmethod
    def _keys(cls, value: list[str]) -> list[str]:
        if any(not k.strip() or len(k) > 100 for k in value):
            raise ValueError("tag keys must be non-empty and at most 100 characters")
        return value


class TenantTagsIn(BaseModel):
    """Default tags applied to every workload of the tenant (a workload's own tags win)."""

    model_config = ConfigDict(extra="forbid")

    tags: dict[str, str] = Field(max_length=50)
    tenant_id: str | None = None
