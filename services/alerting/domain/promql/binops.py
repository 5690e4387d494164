"""Binary operators between scalars and instant vectors, ported from Prometheus 2.42's engine.

Arithmetic drops __name__; a comparison filters and keeps it, unless `bool` turns it into 0/1.
"""

from __future__ import annotations

from collections.abc import Hashable

from services.alerting.domain.promql.errors import PromQLError
from services.alerting.domain.promql.gomath import go_div, go_mod, go_pow
from services.alerting.domain.promql.nodes import Binary
from services.alerting.domain.promql.vectors import Labels, Vector, drop_name, signature_function

__all__ = ["ARITHMETIC", "COMPARISON", "scalar_binop", "set_binop", "vector_binop", "vector_scalar_binop"]

ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "^"})
COMPARISON = frozenset({"==", "!=", ">", "<", ">=", "<="})


def _arithmetic(op: str, a: float, b: float) -> float:
    match op:
        case "+":
            return a + b
        case "-":
            return a - b
        case "*":
            return a * b
        case "/":
            return go_div(a, b)
        case "%":
            return go_mod(a, b)
        case _:
            return go_pow(a, b)


def _compare(op: str, a: float, b: float) -> bool:
    match op:
        case "==":
            return a == b
        case "!=":
            return a != b
        case ">":
            return a > b
        case "<":
            return a < b
        case ">=":
            return a >= b
        case _:
            return a <= b


def _elem(op: str, a: float, b: float) -> tuple[float, bool]:
    """vectorElemBinop: the value and whether a comparison keeps the element."""
    if op in COMPARISON:
        return a, _compare(op, a, b)
    return _arithmetic(op, a, b), True


def scalar_binop(op: str, a: float, b: float) -> float:
    """Two scalars: arithmetic, or a comparison (which the grammar requires to be `bool`) as 1/0."""
    if op in COMPARISON:
        return 1.0 if _compare(op, a, b) else 0.0
    return _arithmetic(op, a, b)


def vector_scalar_binop(op: str, vector: Vector, scalar: float, *, swap: bool, return_bool: bool) -> Vector:
    """VectorscalarBinop; `swap` when the scalar is the left operand."""
    out: Vector = []
    drop = op in ARITHMETIC or return_bool
    for labels, v in vector:
        lv, rv = (scalar, v) if swap else (v, scalar)
        value, keep = _elem(op, lv, rv)
        if op in COMPARISON and swap:
            value = rv  # a comparison always answers the vector's own value
        if return_bool:
            value, keep = (1.0 if keep else 0.0), True
        if keep:
            out.append((drop_name(labels) if drop else labels, value))
    return out


def _result_labels(lhs: Labels, rhs: Labels, node: Binary) -> Labels:
    """resultMetric: the many side's labels, less what the matching removes, plus group_x labels."""
    labels = drop_name(lhs) if node.op in ARITHMETIC else dict(lhs)
    if node.card == "one-to-one":
        if node.on:
            labels = {k: v for k, v in labels.items() if k in node.labels}
        else:
            labels = {k: v for k, v in labels.items() if k not in node.labels}
    if node.include:
        labels = dict(labels)
        for name in node.include:
            if rhs.get(name):
                labels[name] = rhs[name]
            else:
                labels.pop(name, None)
    return drop_name(labels) if node.return_bool else labels


def vector_binop(node: Binary, lhs: Vector, rhs: Vector) -> Vector:
    """VectorBinop: one-to-one, or many-to-one / one-to-many with group_left / group_right."""
    sig = signature_function(on=node.on, names=node.labels)
    swapped = node.card == "one-to-many"
    if swapped:
        lhs, rhs = rhs, lhs
    one_side: dict[Hashable, tuple[Labels, float]] = {}
    for labels, v in rhs:
        key = sig(labels)
        if key in one_side:
            side = "left" if swapped else "right"
            raise PromQLError(
                f"found duplicate series for the match group on the {side} hand-side of the operation:"
                f" [{labels}, {one_side[key][0]}];many-to-many matching not allowed: matching labels must be"
                " unique on one side"
            )
        one_side[key] = (labels, v)
    matched: dict[Hashable, set[frozenset[tuple[str, str]]] | None] = {}
    out: Vector = []
    for labels, v in lhs:
        key = sig(labels)
        found = one_side.get(key)
        if found is None:
            continue
        rlabels, rv = found
        vl, vr = (rv, v) if swapped else (v, rv)
        value, keep = _elem(node.op, vl, vr)
        if node.return_bool:
            value = 1.0 if keep else 0.0
        elif not keep:
            continue
        metric = _result_labels(labels, rlabels, node)
        _check_match(node, matched, key, metric)
        out.append((metric, value))
    return out


def _check_match(
    node: Binary,
    matched: dict[Hashable, set[frozenset[tuple[str, str]]] | None],
    key: Hashable,
    metric: Labels,
) -> None:
    if node.card == "one-to-one":
        if key in matched:
            raise PromQLError(
                "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)"
            )
        matched[key] = None
        return
    inserted = matched.setdefault(key, set())
    assert inserted is not None
    identity = frozenset(metric.items())
    if identity in inserted:
        raise PromQLError("multiple matches for labels: grouping labels must ensure unique matches")
    inserted.add(identity)


def set_binop(node: Binary, lhs: Vector, rhs: Vector) -> Vector:
    """and, or, unless (VectorAnd, VectorOr, VectorUnless): elements kept whole, __name__ included."""
    sig = signature_function(on=node.on, names=node.labels)
    if node.op == "and":
        if not lhs or not rhs:
            return []
        right = {sig(labels) for labels, _ in rhs}
        return [s for s in lhs if sig(s[0]) in right]
    if node.op == "or":
        if not lhs or not rhs:
            return [*lhs, *rhs]
        left = {sig(labels) for labels, _ in lhs}
        return [*lhs, *(s for s in rhs if sig(s[0]) not in left)]
    if not lhs or not rhs:
        return list(lhs)
    right = {sig(labels) for labels, _ in rhs}
    return [s for s in lhs if sig(s[0]) not in right]
