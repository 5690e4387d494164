"""The one place billing's domain errors become HTTP errors."""

from __future__ import annotations

from libs.common.http import Conflict, NotFound, Unprocessable
from services.billing.domain.prices import PriceCollisionError, RetroactivePriceError

__all__ = ["invalid_price", "no_budget", "price_exists", "retroactive_price"]


def invalid_price(exc: ValueError) -> Unprocessable:
    """A price entry the domain refuses to build (e.g. an empty validity window)."""
    return Unprocessable(str(exc), field="effective_from")


def retroactive_price(exc: RetroactivePriceError) -> Unprocessable:
    """A price change that would take effect in the past."""
    return Unprocessable("a price change may not take effect in the past", field="effective_from")


def price_collides(exc: PriceCollisionError) -> Conflict:
    """Another price version of the same resource and class takes effect at that instant."""
    return Conflict(str(exc), field="effective_from")


def price_exists() -> Conflict:
    """A price with this id, or for this resource at this instant, is already stored."""
    return Conflict("a price with this id, or for this resource at this instant, exists", field="price_id")


def no_budget(project: str) -> NotFound:
    """The project has no budget to remove."""
    return NotFound(f"no budget for project {project!r}", field="project")
