"""PromQL's functions over a window of samples, and over single values, ported from Prometheus 2.42.

Range functions take one series' window (ms times and values, stale markers already left out) and
answer a value, or None where Prometheus answers no sample. Value functions map one value.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from services.alerting.domain.promql.gomath import go_ceil, go_div, go_floor, go_max, go_min

__all__ = [
    "KEEPS_NAME",
    "RANGE_FUNCTIONS",
    "SPECIAL_FUNCTIONS",
    "SUPPORTED_FUNCTIONS",
    "VALUE_FUNCTIONS",
    "extrapolated_rate",
    "kahan_add",
    "quantile",
]

RangeFunction = Callable[[list[int], list[float], int, int, int], float | None]


def extrapolated_rate(
    times: list[int], values: list[float], *, start: int, end: int, is_counter: bool, is_rate: bool
) -> float | None:
    """rate, increase and delta: promql/functions.go extrapolatedRate of Prometheus 2.42, float samples."""
    if len(values) < 2:
        return None
    result = values[-1] - values[0]
    if is_counter:
        prev = values[0]
        for current in values[1:]:
            if current < prev:
                result += prev
            prev = current
    duration_to_start = (times[0] - start) / 1000
    duration_to_end = (end - times[-1]) / 1000
    sampled_interval = (times[-1] - times[0]) / 1000
    average_between = sampled_interval / (len(values) - 1)
    if is_counter and result > 0 and values[0] >= 0:
        # A counter cannot go below zero: do not extrapolate past the point where it would.
        duration_to_zero = sampled_interval * (values[0] / result)
        duration_to_start = min(duration_to_start, duration_to_zero)
    threshold = average_between * 1.1
    interval = sampled_interval
    interval += duration_to_start if duration_to_start < threshold else average_between / 2
    interval += duration_to_end if duration_to_end < threshold else average_between / 2
    factor = interval / sampled_interval
    if is_rate:
        factor /= (end - start) / 1000
    return result * factor


def _rate(times: list[int], values: list[float], start: int, end: int, _r: int) -> float | None:
    return extrapolated_rate(times, values, start=start, end=end, is_counter=True, is_rate=True)


def _increase(times: list[int], values: list[float], start: int, end: int, _r: int) -> float | None:
    return extrapolated_rate(times, values, start=start, end=end, is_counter=True, is_rate=False)


def _delta(times: list[int], values: list[float], start: int, end: int, _r: int) -> float | None:
    return extrapolated_rate(times, values, start=start, end=end, is_counter=False, is_rate=False)


def _instant_value(times: list[int], values: list[float], *, is_rate: bool) -> float | None:
    """irate and idelta (instantValue): the last two samples."""
    if len(values) < 2:
        return None
    last, previous = values[-1], values[-2]
    result = last if is_rate and last < previous else last - previous
    interval = times[-1] - times[-2]
    if interval == 0:
        return None
    return result / (interval / 1000) if is_rate else result


def _irate(times: list[int], values: list[float], _s: int, _e: int, _r: int) -> float | None:
    return _instant_value(times, values, is_rate=True)


def _idelta(times: list[int], values: list[float], _s: int, _e: int, _r: int) -> float | None:
    return _instant_value(times, values, is_rate=False)


def _over_time(fold: Callable[[list[float]], float]) -> RangeFunction:
    """An aggregation over time: no sample out of an empty window."""

    def apply(_t: list[int], values: list[float], _s: int, _e: int, _r: int) -> float | None:
        return fold(values) if values else None

    return apply


def kahan_add(inc: float, total: float, c: float) -> tuple[float, float]:
    """kahanSumInc: one step of Kahan-Neumaier compensated summation, as the *_over_time sums use."""
    t = total + inc
    if abs(total) >= abs(inc):
        c += (total - t) + inc
    else:
        c += (inc - t) + total
    return t, c


def _avg(values: list[float]) -> float:
    mean, count, c = 0.0, 0.0, 0.0
    for v in values:
        count += 1
        if math.isinf(mean):
            if math.isinf(v) and (mean > 0) == (v > 0):
                continue  # Inf of the same sign: the mean is already right
            if not math.isinf(v) and not math.isnan(v):
                continue  # an infinite mean stays infinite, rather than Inf - Inf = NaN
        mean, c = kahan_add(v / count - mean / count, mean, c)
    return mean if math.isinf(mean) else mean + c


def _sum(values: list[float]) -> float:
    total, c = 0.0, 0.0
    for v in values:
        total, c = kahan_add(v, total, c)
    return total if math.isinf(total) else total + c


def _max(values: list[float]) -> float:
    best = values[0]
    for v in values:
        if v > best or best != best:
            best = v
    return best


def _min(values: list[float]) -> float:
    best = values[0]
    for v in values:
        if v < best or best != best:
            best = v
    return best


def _stdvar(values: list[float]) -> float:
    count, mean, c_mean, aux, c_aux = 0.0, 0.0, 0.0, 0.0, 0.0
    for v in values:
        count += 1
        delta = v - (mean + c_mean)
        mean, c_mean = kahan_add(delta / count, mean, c_mean)
        aux, c_aux = kahan_add(delta * (v - (mean + c_mean)), aux, c_aux)
    return (aux + c_aux) / count


def _changes(_t: list[int], values: list[float], _s: int, _e: int, _r: int) -> float | None:
    if not values:
        return None
    changes, prev = 0, values[0]
    for current in values[1:]:
        if current != prev and not (current != current and prev != prev):
            changes += 1
        prev = current
    return float(changes)


def _resets(_t: list[int], values: list[float], _s: int, _e: int, _r: int) -> float | None:
    if not values:
        return None
    resets, prev = 0, values[0]
    for current in values[1:]:
        if current < prev:
            resets += 1
        prev = current
    return float(resets)


def quantile(q: float, values: list[float]) -> float:
    """The q-quantile by linear interpolation between the closest ranks (Prometheus's quantile)."""
    if not values:
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(values, key=lambda v: (v == v, v if v == v else 0.0))  # NaN sorts first, as in Go
    n = len(ordered)
    rank = q * (n - 1)
    lower = max(0.0, math.floor(rank))
    upper = min(n - 1.0, lower + 1)
    weight = rank - math.floor(rank)
    return ordered[int(lower)] * (1 - weight) + ordered[int(upper)] * weight


RANGE_FUNCTIONS: dict[str, RangeFunction] = {
    "rate": _rate,
    "increase": _increase,
    "delta": _delta,
    "irate": _irate,
    "idelta": _idelta,
    "changes": _changes,
    "resets": _resets,
    "avg_over_time": _over_time(_avg),
    "sum_over_time": _over_time(_sum),
    "min_over_time": _over_time(_min),
    "max_over_time": _over_time(_max),
    "count_over_time": _over_time(lambda values: float(len(values))),
    "last_over_time": _over_time(lambda values: values[-1]),
    "present_over_time": _over_time(lambda _values: 1.0),
    "stdvar_over_time": _over_time(_stdvar),
    "stddev_over_time": _over_time(lambda values: math.sqrt(_stdvar(values))),
}

#: Range functions whose result keeps the series' __name__ (Prometheus drops it for all others).
KEEPS_NAME = frozenset({"last_over_time"})


def _round(v: float, to_nearest: float = 1.0) -> float:
    inverse = go_div(1.0, to_nearest)
    return go_div(go_floor(v * inverse + 0.5), inverse)


VALUE_FUNCTIONS: dict[str, Callable[..., float]] = {
    "abs": abs,
    "ceil": go_ceil,
    "floor": go_floor,
    "round": _round,
    "clamp": lambda v, lo, hi: go_max(lo, go_min(hi, v)),
    "clamp_min": lambda v, lo: go_max(lo, v),
    "clamp_max": lambda v, hi: go_min(hi, v),
}

#: Functions the evaluator answers itself: they need labels, the evaluation time, or the selector.
SPECIAL_FUNCTIONS = frozenset(
    {
        "time",
        "vector",
        "scalar",
        "absent",
        "absent_over_time",
        "timestamp",
        "sort",
        "sort_desc",
        "quantile_over_time",
    }
)

SUPPORTED_FUNCTIONS = frozenset(RANGE_FUNCTIONS) | frozenset(VALUE_FUNCTIONS) | SPECIAL_FUNCTIONS
