"""Go's float64 arithmetic where Python's differs: Python raises on x/0, 0**-1 and fmod(x, 0), Go answers.

Prometheus computes in Go, so each operator and function here answers what Go's would, special cases
included (math.Max, math.Min, math.Mod, math.Pow, strconv.FormatFloat(v, 'f', -1, 64)).
"""

from __future__ import annotations

import math
from decimal import Decimal

__all__ = ["go_ceil", "go_div", "go_floor", "go_format_f", "go_max", "go_min", "go_mod", "go_pow"]

_INF = math.inf
_NAN = math.nan


def go_div(a: float, b: float) -> float:
    """a / b as IEEE 754 (and Go) divide: ±Inf or NaN for a zero divisor."""
    if b != 0:
        return a / b
    if a == 0 or a != a:
        return _NAN
    return math.copysign(_INF, a) * math.copysign(1.0, b)


def go_mod(a: float, b: float) -> float:
    """math.Mod: NaN for an infinite dividend or a zero divisor, the sign of the dividend otherwise."""
    try:
        return math.fmod(a, b)
    except ValueError:
        return _NAN


def go_max(a: float, b: float) -> float:
    """math.Max: +Inf wins over NaN, NaN over numbers, +0 over -0."""
    if a == _INF or b == _INF:
        return _INF
    if a != a or b != b:
        return _NAN
    if a == 0 and b == 0:
        return a if math.copysign(1.0, a) > 0 else b
    return a if a > b else b


def go_min(a: float, b: float) -> float:
    """math.Min: -Inf wins over NaN, NaN over numbers, -0 over +0."""
    if a == -_INF or b == -_INF:
        return -_INF
    if a != a or b != b:
        return _NAN
    if a == 0 and b == 0:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def go_floor(v: float) -> float:
    """math.Floor, which keeps Inf, NaN and the sign of zero."""
    if not math.isfinite(v) or v == 0:
        return v
    return float(math.floor(v))


def go_ceil(v: float) -> float:
    """math.Ceil: -Floor(-v), so ceil(-0.5) is -0."""
    return -go_floor(-v)


def _is_odd_int(y: float) -> bool:
    if not math.isfinite(y) or abs(y) >= 2**53:
        return False
    return y == int(y) and int(y) % 2 == 1


def _pow_special(x: float, y: float) -> float | None:
    """Go's listed special cases of math.Pow, or None when the general algorithm applies."""
    result: float | None = None
    if y == 0 or x == 1:
        result = 1.0
    elif y == 1:
        result = x
    elif x != x or y != y:
        result = _NAN
    elif x == 0:
        if y < 0:
            result = math.copysign(_INF, x) if _is_odd_int(y) else _INF
        else:
            result = x if _is_odd_int(y) else 0.0
    elif math.isinf(y):
        result = 1.0 if x == -1 else _INF if (abs(x) < 1) == (y < 0) else 0.0
    elif math.isinf(x):
        if x < 0:
            return go_pow(-0.0, -y)
        result = _INF if y > 0 else 0.0
    elif y == 0.5:
        result = math.sqrt(x) if x >= 0 else _NAN
    elif y == -0.5:
        result = 1 / math.sqrt(x) if x >= 0 else _NAN
    return result


def go_pow(x: float, y: float) -> float:
    """math.Pow, ported: the fractional part by exp(log), the integral part by repeated squaring."""
    special = _pow_special(x, y)
    if special is not None:
        return special
    yf, yi = math.modf(abs(y))
    if yf != 0 and x < 0:
        return _NAN
    if yi >= 2**63:
        # yi is a large even int: the result is 0, 1 or Inf (Go's own special case).
        if x == -1:
            return 1.0
        return 0.0 if (abs(x) < 1) == (y > 0) else _INF
    a1, ae = 1.0, 0
    if yf != 0:
        if yf > 0.5:
            yf -= 1
            yi += 1
        a1 = math.exp(yf * math.log(x))
    x1, xe = math.frexp(x)
    i = int(yi)
    while i != 0:
        if xe < -(1 << 12) or xe > (1 << 12):
            # Catastrophic overflow; Go lets Ldexp sort it out.
            ae += xe
            break
        if i & 1 == 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        i >>= 1
    if y < 0:
        a1 = 1 / a1
        ae = -ae
    return _ldexp(a1, ae)


def _ldexp(frac: float, exp: int) -> float:
    try:
        return math.ldexp(frac, exp)
    except OverflowError:
        return math.copysign(_INF, frac)


def go_format_f(v: float) -> str:
    """strconv.FormatFloat(v, 'f', -1, 64): the shortest round-tripping digits, never an exponent."""
    if v != v:
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return format(Decimal(repr(v)).normalize(), "f")
