"""Evaluation of compiled nodes at one instant, as Prometheus 2.42's instant query evaluates them."""

from __future__ import annotations

import math
from collections.abc import Iterator

from services.alerting.domain.promql.aggregations import aggregate
from services.alerting.domain.promql.binops import (
    ARITHMETIC,
    scalar_binop,
    set_binop,
    vector_binop,
    vector_scalar_binop,
)
from services.alerting.domain.promql.errors import PromQLError
from services.alerting.domain.promql.functions import KEEPS_NAME, RANGE_FUNCTIONS, VALUE_FUNCTIONS, quantile
from services.alerting.domain.promql.nodes import (
    Aggregate,
    Binary,
    Call,
    Negate,
    Node,
    Number,
    Paren,
    RangeSelect,
    Select,
    Selector,
    String,
)
from services.alerting.domain.promql.store import Series, SeriesStore
from services.alerting.domain.promql.vectors import Labels, Vector, check_unique, drop_name

__all__ = ["LOOKBACK_MS", "Evaluator"]

#: How far back an instant selector looks for a sample (Prometheus's default --query.lookback-delta).
LOOKBACK_MS = 300_000

Value = float | Vector | str


class Evaluator:
    """One evaluation of one expression against a store at time `t_ms`."""

    def __init__(self, store: SeriesStore, t_ms: int) -> None:
        self._store = store
        self._t = t_ms

    def eval(self, node: Node) -> Value:
        """The node's value: a float for a scalar, a vector, or a string literal's text."""
        match node:
            case Number(value=value):
                return value
            case String(value=value):
                return value
            case Paren(expr=expr):
                return self.eval(expr)
            case Select(selector=selector):
                return [(series.labels, v) for series, _, v in self._instant(selector)]
            case Negate(expr=expr):
                return self._negate(expr)
            case Binary():
                return self._binary(node)
            case Aggregate():
                return self._aggregate(node)
            case Call():
                return self._call(node)
            case RangeSelect():
                raise PromQLError("a range vector is only evaluated as a function argument")
        raise PromQLError(f"cannot evaluate {node}")  # pragma: no cover - compile admits no other node

    def scalar(self, node: Node) -> float:
        """A node the grammar makes a scalar."""
        value = self.eval(node)
        assert isinstance(value, float)
        return value

    def vector(self, node: Node) -> Vector:
        """A node the grammar makes an instant vector."""
        value = self.eval(node)
        assert isinstance(value, list)
        return value

    def _series(self, selector: Selector) -> Iterator[Series]:
        for series in self._store.named(selector.metric):
            if all(m.matches(series.labels) for m in selector.matchers):
                yield series

    def _instant(self, selector: Selector) -> Iterator[tuple[Series, int, float]]:
        ref = self._t - selector.offset_ms
        for series in self._series(selector):
            found = series.latest(ref, LOOKBACK_MS)
            if found is not None:
                yield series, found[0], found[1]

    def _windows(self, node: RangeSelect) -> Iterator[tuple[Labels, list[int], list[float], int, int]]:
        end = self._t - node.selector.offset_ms
        start = end - node.range_ms
        for series in self._series(node.selector):
            times, values = series.window(start, end)
            yield series.labels, times, values, start, end

    def _negate(self, expr: Node) -> Value:
        value = self.eval(expr)
        if isinstance(value, float):
            return -value
        assert isinstance(value, list)
        return check_unique([(drop_name(labels), -v) for labels, v in value])

    def _binary(self, node: Binary) -> Value:
        lhs, rhs = self.eval(node.lhs), self.eval(node.rhs)
        if isinstance(lhs, float) and isinstance(rhs, float):
            return scalar_binop(node.op, lhs, rhs)
        if isinstance(lhs, list) and isinstance(rhs, float):
            result = vector_scalar_binop(node.op, lhs, rhs, swap=False, return_bool=node.return_bool)
        elif isinstance(lhs, float) and isinstance(rhs, list):
            result = vector_scalar_binop(node.op, rhs, lhs, swap=True, return_bool=node.return_bool)
        else:
            assert isinstance(lhs, list)
            assert isinstance(rhs, list)
            if node.card == "many-to-many":
                return check_unique(set_binop(node, lhs, rhs))
            result = vector_binop(node, lhs, rhs)
        if node.op in ARITHMETIC or node.return_bool:
            check_unique(result)
        return result

    def _aggregate(self, node: Aggregate) -> Vector:
        param = None if node.param is None else self.eval(node.param)
        assert not isinstance(param, list)
        return aggregate(
            node.op, self.vector(node.expr), names=node.labels, without=node.without, param=param
        )

    def _call(self, node: Call) -> Value:
        name, args = node.name, node.args
        if name in RANGE_FUNCTIONS:
            arg = args[0]
            assert isinstance(arg, RangeSelect)
            return self._range_function(name, arg)
        if name in VALUE_FUNCTIONS:
            return self._value_function(name, args)
        return self._special(name, args)

    def _range_function(self, name: str, arg: RangeSelect) -> Vector:
        fn = RANGE_FUNCTIONS[name]
        out: Vector = []
        for labels, times, values, start, end in self._windows(arg):
            value = fn(times, values, start, end, arg.range_ms)
            if value is not None:
                out.append((labels if name in KEEPS_NAME else drop_name(labels), value))
        return check_unique(out)

    def _value_function(self, name: str, args: tuple[Node, ...]) -> Vector:
        vector = self.vector(args[0])
        params = [self.scalar(a) for a in args[1:]]
        if name == "clamp" and params[1] < params[0]:
            return []
        fn = VALUE_FUNCTIONS[name]
        return check_unique([(drop_name(labels), fn(v, *params)) for labels, v in vector])

    def _special(self, name: str, args: tuple[Node, ...]) -> Value:
        match name:
            case "time":
                return self._t / 1000
            case "vector":
                return [({}, self.scalar(args[0]))]
            case "scalar":
                vector = self.vector(args[0])
                return vector[0][1] if len(vector) == 1 else math.nan
            case "sort" | "sort_desc":
                return self.vector(args[0])  # order is the caller's business: these change nothing else
            case "timestamp":
                return self._timestamp(args[0])
            case "absent":
                return [] if self.vector(args[0]) else [(_absent_labels(args[0]), 1.0)]
            case "absent_over_time":
                return self._absent_over_time(args[0])
            case "quantile_over_time":
                return self._quantile_over_time(args[0], args[1])
        raise PromQLError(f"{name} is not supported")  # pragma: no cover - compile refuses it first

    def _timestamp(self, arg: Node) -> Vector:
        while isinstance(arg, Paren):
            arg = arg.expr
        if isinstance(arg, Select):
            # Of a selector, the sample's own time; of anything else, the evaluation time (as in 2.42).
            found = [(drop_name(s.labels), t / 1000) for s, t, _ in self._instant(arg.selector)]
            return check_unique(found)
        return check_unique([(drop_name(labels), self._t / 1000) for labels, _ in self.vector(arg)])

    def _absent_over_time(self, arg: Node) -> Vector:
        assert isinstance(arg, RangeSelect)
        if any(values for _, _, values, _, _ in self._windows(arg)):
            return []
        return [(_absent_labels(arg), 1.0)]

    def _quantile_over_time(self, q_node: Node, arg: Node) -> Vector:
        assert isinstance(arg, RangeSelect)
        q = self.scalar(q_node)
        out = [
            (drop_name(labels), quantile(q, values))
            for labels, _, values, _, _ in self._windows(arg)
            if values
        ]
        return check_unique(out)


def _absent_labels(arg: Node) -> Labels:
    """The labels absent() answers with: a direct selector's equality matchers, else none."""
    if isinstance(arg, Select | RangeSelect):
        return dict(arg.selector.absent_labels)
    return {}
