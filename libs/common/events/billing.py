"""Billing facts other services act on: budgets, idle reclaim, fair-share usage."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field

from libs.common.events import topics
from libs.common.events.base import Event

TOPIC = topics.BILLING


class BudgetThresholdCrossedV1(Event):
    """A project's spend this month crossed a budget threshold."""

    type: Literal["billing.budget.threshold_crossed.v1"] = "billing.budget.threshold_crossed.v1"
    tenant_id: str = Field(description="Tenant.")
    project: str = Field(description="Project tag value.")
    month: str = Field(description="YYYY-MM.")
    threshold_pct: int = Field(description="Threshold crossed, e.g. 80.")
    spend_micros: int = Field(description="Spend so far this month, micro-currency.")
    budget_micros: int = Field(description="Monthly budget, micro-currency.")
    hard_stop: bool = Field(default=False, description="True when new work must be refused.")

    def subject(self) -> str:
        return f"{self.tenant_id}/{self.project}"


class IdleReclaimV1(Event):
    """An idle instance was warned, or its release was requested, after the idle period."""

    type: Literal["billing.idle.reclaim.v1"] = "billing.idle.reclaim.v1"
    tenant_id: str = Field(description="Tenant.")
    workload_id: str = Field(description="Idle instance.")
    stage: Literal["warning", "release_requested"] = Field(description="Which step.")
    idle_hours: float = Field(description="Hours without work so far.")

    def subject(self) -> str:
        return self.workload_id


class UsageDecayedV1(Event):
    """A tenant's decayed usage, the input of the scheduler's fair share."""

    type: Literal["billing.usage.decayed.v1"] = "billing.usage.decayed.v1"
    tenant_id: str = Field(description="Tenant.")
    decayed_unit_hours: Decimal = Field(description="Compute-unit-hours with half-life decay applied.")
    half_life_hours: float = Field(description="Half-life used.")

    def subject(self) -> str:
        return self.tenant_id


EVENTS: tuple[type[Event], ...] = (BudgetThresholdCrossedV1, IdleReclaimV1, UsageDecayedV1)
