"""Aggregation operators over an instant vector, ported from Prometheus 2.42's engine.aggregation.

topk/bottomk keep Go's container/heap order of operations so that ties pick the same series.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from services.alerting.domain.promql.errors import PromQLError
from services.alerting.domain.promql.functions import quantile
from services.alerting.domain.promql.gomath import go_format_f
from services.alerting.domain.promql.vectors import NAME, Labels, Sample, Vector

__all__ = ["aggregate"]

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_INT64 = 2.0**63


@dataclass(slots=True)
class _Group:
    labels: Labels
    value: float
    mean: float
    count: int = 1
    heap: list[Sample] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


Less = Callable[[Sample, Sample], bool]


def _less_top(a: Sample, b: Sample) -> bool:
    return a[1] != a[1] or a[1] < b[1]


def _less_bottom(a: Sample, b: Sample) -> bool:
    return a[1] != a[1] or a[1] > b[1]


def _up(h: list[Sample], j: int, less: Less) -> None:
    while j > 0:
        i = (j - 1) // 2
        if not less(h[j], h[i]):
            break
        h[i], h[j] = h[j], h[i]
        j = i


def _down(h: list[Sample], i: int, n: int, less: Less) -> None:
    while True:
        j = 2 * i + 1
        if j >= n:
            break
        if j + 1 < n and less(h[j + 1], h[j]):
            j += 1
        if not less(h[j], h[i]):
            break
        h[i], h[j] = h[j], h[i]
        i = j


def _heap_offer(h: list[Sample], sample: Sample, k: int, less: Less) -> None:
    """One topk/bottomk step: Go's `heap.Pop` then `heap.Push`, or the k == 1 in-place swap."""
    if len(h) >= k and not less(h[0], sample):  # less() is true for a NaN on top, as Go's test is
        return
    if len(h) == k:
        if k == 1:
            h[0] = sample
            return
        n = len(h) - 1
        h[0], h[n] = h[n], h[0]
        _down(h, 0, n, less)
        h.pop()
    h.append(sample)
    _up(h, len(h) - 1, less)


def _group_key(labels: Labels, names: tuple[str, ...], without: bool) -> Hashable:
    if without:
        dropped = frozenset(names) | {NAME}
        return frozenset(item for item in labels.items() if item[0] not in dropped)
    return tuple(labels.get(n, "") for n in names)


def _group_labels(labels: Labels, names: tuple[str, ...], without: bool) -> Labels:
    if without:
        return {k: v for k, v in labels.items() if k not in names and k != NAME}
    return {k: v for k, v in labels.items() if k in names}


def _add(op: str, group: _Group, sample: Sample, k: int) -> None:
    v = sample[1]
    if op == "sum":
        group.value += v
    elif op == "avg":
        group.count += 1
        if math.isinf(group.mean) and (
            (math.isinf(v) and (group.mean > 0) == (v > 0)) or (not math.isinf(v) and v == v)
        ):
            return
        group.mean += v / group.count - group.mean / group.count
    elif op == "max":
        if group.value < v or group.value != group.value:
            group.value = v
    elif op == "min":
        if group.value > v or group.value != group.value:
            group.value = v
    elif op in ("count", "count_values"):
        group.count += 1
    elif op in ("stddev", "stdvar"):
        group.count += 1
        delta = v - group.mean
        group.mean += delta / group.count
        group.value += delta * (v - group.mean)
    elif op in ("topk", "bottomk"):
        _heap_offer(group.heap, sample, k, _less_top if op == "topk" else _less_bottom)
    elif op == "quantile":
        group.values.append(v)


def _result(op: str, group: _Group, q: float) -> Vector:
    if op in ("topk", "bottomk"):
        return list(group.heap)
    value = group.value
    if op == "avg":
        value = group.mean
    elif op in ("count", "count_values"):
        value = float(group.count)
    elif op == "stdvar":
        value = group.value / group.count
    elif op == "stddev":
        value = math.sqrt(group.value / group.count)
    elif op == "quantile":
        value = quantile(q, group.values)
    return [(group.labels, value)]


def _k(param: float | str | None) -> int:
    assert isinstance(param, float)
    if not (-_INT64 <= param <= _INT64):
        raise PromQLError(f"Scalar value {param} overflows int64")
    return int(param)


def aggregate(
    op: str, vector: Vector, *, names: tuple[str, ...], without: bool, param: float | str | None
) -> Vector:
    """One aggregation step; `param` is k, q or the count_values label, already evaluated."""
    k = _k(param) if op in ("topk", "bottomk") else 0
    if op in ("topk", "bottomk") and k < 1:
        return []
    q = param if op == "quantile" and isinstance(param, float) else 0.0
    value_label = ""
    if op == "count_values":
        assert isinstance(param, str)
        value_label = param
        if not _LABEL_NAME.fullmatch(value_label):
            raise PromQLError(f"invalid label name {value_label!r}")
        if not without:
            names = (*names, value_label)
    groups: dict[Hashable, _Group] = {}
    for labels, v in vector:
        if op == "count_values":
            labels = {**labels, value_label: go_format_f(v)}
        key = _group_key(labels, names, without)
        group = groups.get(key)
        if group is None:
            groups[key] = _new_group(op, (labels, v), names, without)
            continue
        _add(op, group, (labels, v), k)
    return [s for group in groups.values() for s in _result(op, group, q)]


def _new_group(op: str, sample: Sample, names: tuple[str, ...], without: bool) -> _Group:
    labels, v = sample
    group = _Group(labels=_group_labels(labels, names, without) if without or names else {}, value=v, mean=v)
    if op in ("stddev", "stdvar"):
        group.value = 0.0
    elif op in ("topk", "bottomk"):
        group.heap = [sample]
    elif op == "quantile":
        group.values = [v]
    elif op == "group":
        group.value = 1.0
    return group
