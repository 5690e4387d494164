"""The two ways a PromQL expression is turned away: it is not PromQL, or it is PromQL we do not evaluate."""

from __future__ import annotations

__all__ = ["PromQLError", "UnsupportedPromQL"]


class PromQLError(ValueError):
    """Not a valid expression (the message names the problem), or an evaluation Prometheus would fail."""


class UnsupportedPromQL(PromQLError):
    """Valid PromQL using a construct this evaluator refuses; the message names the construct."""
