"""A parsed PromQL expression: what it reads, how far back, and its value at an instant."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields

from services.alerting.domain.promql.compile import compile_expr
from services.alerting.domain.promql.errors import UnsupportedPromQL
from services.alerting.domain.promql.evaluate import LOOKBACK_MS, Evaluator
from services.alerting.domain.promql.nodes import Node, RangeSelect, Select
from services.alerting.domain.promql.store import SeriesStore, to_ms

__all__ = ["Query"]


def _selects(node: Node) -> Iterator[Select | RangeSelect]:
    if isinstance(node, Select | RangeSelect):
        yield node
        return
    for f in fields(node):
        child = getattr(node, f.name)
        children = child if isinstance(child, tuple) else (child,)
        for c in children:
            if isinstance(c, tuple | str | float | bool | type(None)):
                continue
            yield from _selects(c)


def _reach_ms(node: Select | RangeSelect) -> int:
    return node.selector.offset_ms + (node.range_ms if isinstance(node, RangeSelect) else 0)


@dataclass(frozen=True, slots=True)
class Query:
    """A PromQL expression checked at parse time; evaluation never refuses a construct."""

    text: str
    metric_names: frozenset[str]
    #: Seconds of history evaluation at t can read: the longest range plus offset, plus the lookback.
    horizon: float
    _root: Node = field(repr=False, compare=False)

    @classmethod
    def parse(cls, text: str) -> Query:
        """PromQLError for what is not PromQL, UnsupportedPromQL for a construct we refuse."""
        root = compile_expr(text)
        if root.kind == "matrix":
            raise UnsupportedPromQL("a range vector result is not supported: wrap it in a function")
        if root.kind == "string":
            raise UnsupportedPromQL("a string result is not supported")
        selects = list(_selects(root))
        reach = max((_reach_ms(s) for s in selects), default=0)
        return cls(
            text=text,
            metric_names=frozenset(s.selector.metric for s in selects),
            horizon=(max(reach, 0) + LOOKBACK_MS) / 1000,
            _root=root,
        )

    def instant(self, store: SeriesStore, t: float) -> list[tuple[dict[str, str], float]]:
        """The expression evaluated at t as Prometheus's instant query does: a vector as (labels, value) pairs
        (labels without __name__ where Prometheus drops it), a scalar as [({}, value)]."""
        value = Evaluator(store, to_ms(t)).eval(self._root)
        if isinstance(value, float):
            return [({}, value)]
        assert isinstance(value, list)
        return [(dict(labels), v) for labels, v in value]
