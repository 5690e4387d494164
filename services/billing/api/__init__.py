"""The billing HTTP API: one router per noun, in the order the app mounts them."""

from __future__ import annotations

from fastapi import APIRouter

from services.billing.api import (
    accrual,
    budgets,
    costs,
    exports,
    idle,
    ledger,
    prices,
    reconciliation,
    sla,
    spot,
    tags,
    usage,
)

__all__ = ["ROUTERS"]

#: Ledger routes first, then configuration and advice (the order of the paths in the OpenAPI document).
ROUTERS: tuple[APIRouter, ...] = (
    sla.router,
    ledger.router,
    costs.router,
    exports.router,
    prices.router,
    budgets.router,
    tags.router,
    idle.router,
    spot.router,
    usage.router,
    accrual.router,
    reconciliation.router,
)
