"""Instant vectors as (labels, value) pairs, and the label rules every operation shares."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from services.alerting.domain.promql.errors import PromQLError

__all__ = ["Labels", "Sample", "Vector", "check_unique", "drop_name", "signature_function"]

Labels = dict[str, str]
Sample = tuple[Labels, float]
Vector = list[Sample]

NAME = "__name__"


def drop_name(labels: Labels) -> Labels:
    """The labels without __name__ (the same dict when there is none: label dicts are never mutated)."""
    if NAME not in labels:
        return labels
    return {k: v for k, v in labels.items() if k != NAME}


def signature_function(*, on: bool, names: tuple[str, ...]) -> Callable[[Labels], Hashable]:
    """The key vector matching joins on: the `on` labels, or all but the `ignoring` ones and __name__."""
    if on:
        return lambda labels: tuple(labels.get(n, "") for n in names)
    ignored = frozenset(names) | {NAME}
    return lambda labels: frozenset(item for item in labels.items() if item[0] not in ignored)


def check_unique(vector: Vector) -> Vector:
    """Prometheus's "vector cannot contain metrics with the same labelset", raised as PromQLError."""
    seen: set[frozenset[tuple[str, str]]] = set()
    for labels, _ in vector:
        key = frozenset(labels.items())
        if key in seen:
            raise PromQLError(f"vector cannot contain metrics with the same labelset: {labels}")
        seen.add(key)
    return vector
