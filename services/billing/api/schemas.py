"""Request bodies of the billing API."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from libs.common.http import BIGINT_MAX, PROJECT_NAME_RULE, valid_project_name
from services.billing.adapters.export_queries import ExportFormat
from services.billing.domain.budgets import DEFAULT_THRESHOLDS
from services.billing.domain.prices import PriceBasis, PricingClass
from services.billing.domain.sla import MAX_CREDIT_RATE, FaultClass
from services.billing.domain.tags import PROJECT

__all__ = ["BudgetIn", "PriceIn", "ScheduleIn", "SlaPolicyIn", "TagPolicyIn", "TenantTagsIn"]


def _printable(text: str) -> str:
    if not text.isprintable():
        raise ValueError("must not hold control or other non-printable characters")
    return text


TenantId = Annotated[str | None, Field(max_length=63, description="Admins: the tenant to act for.")]
TagKey = Annotated[str, Field(min_length=1, max_length=63), AfterValidator(_printable)]
TagValue = Annotated[str, Field(max_length=256), AfterValidator(_printable)]


class ScheduleIn(BaseModel):
    """A daily export of one project."""

    model_config = ConfigDict(extra="forbid")

    format: ExportFormat = Field(default="parquet", description="csv, jsonl or parquet.")
    first_day: date | None = Field(default=None, description="First UTC day to export; default yesterday.")
    tenant_id: TenantId = None


class PriceIn(BaseModel):
    """A new price version; it may not take effect in the past."""

    model_config = ConfigDict(extra="forbid")

    price_id: str = Field(min_length=1, max_length=200)
    gpu_model: str = Field(min_length=1, max_length=100, description="Catalog model, or 'default'.")
    mig_profile: str | None = Field(default=None, max_length=50)
    share_of: int | None = Field(default=None, ge=2, le=64)
    pricing_class: PricingClass
    basis: PriceBasis
    micro_per_hour: int = Field(ge=0, le=BIGINT_MAX, description="Micro-currency per basis-unit-hour.")
    effective_from: datetime
    effective_to: datetime | None = None


class BudgetIn(BaseModel):
    """A project's monthly budget."""

    model_config = ConfigDict(extra="forbid")

    limit_micro: int = Field(gt=0, le=BIGINT_MAX, description="Monthly limit, micro-currency (int64).")
    thresholds: list[int] = Field(default=list(DEFAULT_THRESHOLDS), min_length=1, max_length=10)
    hard_stop: bool = Field(default=False, description="At 100% ask the scheduler to refuse new work.")
    tenant_id: TenantId = None

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
    tenant_id: TenantId = None

    @field_validator("required")
    @classmethod
    def _keys(cls, value: list[str]) -> list[str]:
        if any(not k.strip() or len(k) > 100 or not k.isprintable() for k in value):
            raise ValueError("tag keys must be non-empty, printable and at most 100 characters")
        return value


class TenantTagsIn(BaseModel):
    """Default tags applied to every workload of the tenant (a workload's own tags win)."""

    model_config = ConfigDict(extra="forbid")

    tags: dict[TagKey, TagValue] = Field(
        max_length=50,
        description=f"At most 50; keys 1-63 and values up to 256 printable characters; "
        f"a {PROJECT!r} value is a project name ({PROJECT_NAME_RULE}).",
    )
    tenant_id: TenantId = None

    @field_validator("tags")
    @classmethod
    def _project_is_a_name(cls, value: dict[str, str]) -> dict[str, str]:
        if PROJECT in value and not valid_project_name(value[PROJECT]):
            raise ValueError(f"the {PROJECT!r} tag must be a project name: {PROJECT_NAME_RULE}")
        return value


class SlaPolicyIn(BaseModel):
    """A tenant's SLA policy: the fault classes credited, the rate and the monthly cap."""

    model_config = ConfigDict(extra="forbid")

    fault_classes: list[FaultClass] = Field(
        max_length=len(FaultClass),
        description="Recovery catalog owners credited: driver, hardware, interconnect, memory, thermal "
        "(application only if the platform takes on the workload's own faults too).",
    )
    credit_rate: Decimal = Field(
        ge=0,
        le=MAX_CREDIT_RATE,
        max_digits=12,
        decimal_places=6,
        description="Fraction of the lost time's charge credited: 1 gives back all of it, 2 twice it.",
    )
    monthly_cap_micro: int = Field(
        ge=0, le=BIGINT_MAX, description="Most micro-units credited to the tenant per calendar month (UTC)."
    )
