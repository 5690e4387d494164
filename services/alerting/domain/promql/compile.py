"""PromQL text to evaluable nodes: promql-parser (the parser of record) reads it, this module checks it.

Everything this evaluator refuses is refused here, at parse time, with a message naming the construct,
so that evaluation never meets an expression it cannot answer. This is the one module that imports
promql_parser.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import promql_parser as pp

from services.alerting.domain.promql.errors import PromQLError, UnsupportedPromQL
from services.alerting.domain.promql.functions import SUPPORTED_FUNCTIONS
from services.alerting.domain.promql.nodes import (
    Aggregate,
    Binary,
    Call,
    Kind,
    LabelMatcher,
    MatchOp,
    Negate,
    Node,
    Number,
    Paren,
    RangeSelect,
    Select,
    Selector,
    String,
)

__all__ = ["AGGREGATIONS", "BINARY_OPS", "compile_expr"]

AGGREGATIONS = frozenset(
    {
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
    }
)
BINARY_OPS = frozenset(
    {"+", "-", "*", "/", "%", "^", "==", "!=", ">", "<", ">=", "<=", "and", "or", "unless"}
)
#: Functions of Prometheus 2.42 that promql-parser no longer knows (3.0 renamed holt_winters): refused
#: as unsupported, like any other function we do not evaluate, rather than called a syntax error.
_DROPPED_FUNCTIONS = ("holt_winters",)
# The parser's enums are not hashable: these tables are keyed by their str().
_MATCH_OPS: dict[str, MatchOp] = {
    "MatchOp.Equal": "=",
    "MatchOp.NotEqual": "!=",
    "MatchOp.Re": "=~",
    "MatchOp.NotRe": "!~",
}
_CARDS = {
    "VectorMatchCardinality.OneToOne": "one-to-one",
    "VectorMatchCardinality.ManyToOne": "many-to-one",
    "VectorMatchCardinality.OneToMany": "one-to-many",
    "VectorMatchCardinality.ManyToMany": "many-to-many",
}
_KINDS: dict[str, Kind] = {
    "ValueType.Vector": "vector",
    "ValueType.Scalar": "scalar",
    "ValueType.Matrix": "matrix",
    "ValueType.String": "string",
}


def compile_expr(text: str) -> Node:
    """Parse and check `text`; PromQLError when it is not PromQL, UnsupportedPromQL when we refuse it."""
    try:
        tree = pp.parse(text)
    except BaseException as exc:  # the Rust parser can raise pyo3's PanicException, a BaseException
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        for name in _DROPPED_FUNCTIONS:
            if f"unknown function with name '{name}'" in str(exc):
                raise UnsupportedPromQL(f"{name} is not supported") from None
        raise PromQLError(f"invalid PromQL {text!r}: {exc}") from None
    return _node(tree)


def _ms(delta: timedelta | None) -> int:
    return 0 if delta is None else delta // timedelta(milliseconds=1)


def _node(expr: Any) -> Node:
    if isinstance(expr, pp.NumberLiteral):
        return Number(float(expr.val))
    if isinstance(expr, pp.StringLiteral):
        return String(expr.val)
    if isinstance(expr, pp.ParenExpr):
        inner = _node(expr.expr)
        return Paren(inner, kind=inner.kind)
    if isinstance(expr, pp.UnaryExpr):  # the parser folds unary plus away: this is always a minus
        inner = _node(expr.expr)
        return Negate(inner, kind=inner.kind)
    if isinstance(expr, pp.VectorSelector):
        return Select(_selector(expr))
    if isinstance(expr, pp.MatrixSelector):
        return RangeSelect(_selector(expr.vector_selector), range_ms=_ms(expr.range))
    if isinstance(expr, pp.SubqueryExpr):
        raise UnsupportedPromQL("subqueries (expr[range:step]) are not supported")
    if isinstance(expr, pp.Call):
        return _call(expr)
    if isinstance(expr, pp.AggregateExpr):
        return _aggregate(expr)
    if isinstance(expr, pp.BinaryExpr):
        return _binary(expr)
    raise UnsupportedPromQL(f"the expression {expr} is not supported")


def _selector(vs: Any) -> Selector:
    if vs.at is not None:
        raise UnsupportedPromQL(f"the @ modifier is not supported (in {vs})")
    if vs.matchers.or_matchers:
        raise UnsupportedPromQL(f"'or' between matchers is not supported (Prometheus 3 syntax, in {vs})")
    metric = vs.name
    matchers: list[LabelMatcher] = []
    for m in vs.matchers.matchers:
        op = _MATCH_OPS[str(m.op)]
        if metric is None and m.name == "__name__" and op == "=":
            metric = m.value
            continue
        matchers.append(_matcher(m.name, op, m.value))
    if not metric:
        raise UnsupportedPromQL(
            f"a selector without a metric name is not supported (in {vs}): name the metric, so that"
            " Query.metric_names can say what to feed"
        )
    return Selector(
        metric=metric,
        matchers=tuple(matchers),
        offset_ms=_ms(vs.offset),
        absent_labels=_absent_labels(vs.matchers.matchers),
    )


def _matcher(name: str, op: MatchOp, value: str) -> LabelMatcher:
    if op in ("=", "!="):
        return LabelMatcher(name=name, op=op, value=value)
    try:
        regex = re.compile(f"(?:{value})")
    except re.error as exc:
        raise PromQLError(f"the regex {value!r} of label {name} does not compile here: {exc}") from None
    return LabelMatcher(name=name, op=op, value=value, regex=regex)


def _absent_labels(matchers: list[Any]) -> tuple[tuple[str, str], ...]:
    """createLabelsForAbsentFunction: equality matchers' labels, less any label matched another way too."""
    labels: dict[str, str] = {}
    dropped: list[str] = []
    for m in matchers:
        if m.name == "__name__":
            continue
        if str(m.op) == "MatchOp.Equal" and m.name not in labels:
            labels[m.name] = m.value
        else:
            dropped.append(m.name)
    for name in dropped:
        labels.pop(name, None)
    return tuple(sorted((k, v) for k, v in labels.items() if v))


def _call(expr: Any) -> Call:
    name = expr.func.name
    if name not in SUPPORTED_FUNCTIONS:
        raise UnsupportedPromQL(f"{name} is not supported")
    args = tuple(_node(arg) for arg in expr.args)
    return Call(name=name, args=args, kind=_KINDS[str(expr.func.return_type)])


def _aggregate(expr: Any) -> Aggregate:
    op = str(expr.op)
    if op not in AGGREGATIONS:
        raise UnsupportedPromQL(f"the aggregation {op} is not supported")
    modifier = expr.modifier
    without = modifier is not None and modifier.type == pp.AggModifierType.Without
    labels = tuple(modifier.labels) if modifier is not None else ()
    param = _node(expr.param) if expr.param is not None else None
    return Aggregate(op=op, expr=_node(expr.expr), param=param, labels=labels, without=without)


def _binary(expr: Any) -> Binary:
    op = str(expr.op)
    if op not in BINARY_OPS:
        raise UnsupportedPromQL(f"the binary operator {op} is not supported")
    lhs, rhs = _node(expr.lhs), _node(expr.rhs)
    kind: Kind = "scalar" if lhs.kind == rhs.kind == "scalar" else "vector"
    modifier = expr.modifier
    if modifier is None:
        card = "many-to-many" if op in ("and", "or", "unless") else "one-to-one"
        return Binary(op, lhs, rhs, return_bool=False, card=card, on=False, labels=(), include=(), kind=kind)
    fill = modifier.fill_values
    if fill is not None and (fill.lhs is not None or fill.rhs is not None):
        raise UnsupportedPromQL("fill modifiers are not supported (Prometheus 3 syntax)")
    matching = modifier.matching
    on = matching is not None and matching.type == pp.LabelModifierType.Include
    return Binary(
        op,
        lhs,
        rhs,
        return_bool=bool(modifier.return_bool),
        card=_CARDS[str(modifier.card)] if kind == "vector" else "one-to-one",
        on=on,
        labels=tuple(matching.labels) if matching is not None else (),
        include=tuple(modifier.group_labels or ()),
        kind=kind,
    )
