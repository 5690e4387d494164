"""promtool's test notation: series selectors (`x{a="b"}`) and expanding values (`0+10x20`, `1 _x3 stale`)."""

from __future__ import annotations

import json
import re

from services.alerting.domain.promql import STALE_NAN

__all__ = ["expand_values", "parse_series"]

_NUMBER = r"[+-]?(?:Inf|NaN|\d+(?:\.\d+)?(?:e[+-]?\d+)?)"
_ITEM = re.compile(
    rf"(?P<blank>_)(?:x(?P<blanks>\d+))?"
    rf"|(?P<value>stale|{_NUMBER})(?:(?P<step>[+-]\d+(?:\.\d+)?(?:e[+-]?\d+)?)?x(?P<times>\d+))?"
)
_SERIES = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)?(?:\{(?P<body>.*)\})?")
_PAIR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def expand_values(text: str) -> list[float | None]:
    """One value per interval, None where promtool omits one (`_`), STALE_NAN for `stale`.

    `a+bxN` is N+1 values, each the previous plus b (added up as promtool adds it); `_xN` is N gaps.
    """
    out: list[float | None] = []
    for token in text.split():
        found = _ITEM.fullmatch(token)
        if found is None:
            raise ValueError(f"not promtool series notation: {token!r}")
        if found["blank"]:
            out.extend([None] * int(found["blanks"] or 1))
            continue
        value = STALE_NAN if found["value"] == "stale" else float(found["value"])
        if found["times"] is None:
            out.append(value)
            continue
        step = float(found["step"] or 0)
        for _ in range(int(found["times"]) + 1):
            out.append(value)
            value += step
    return out


def parse_series(text: str) -> dict[str, str]:
    """`name{a="b",...}` to its labels, __name__ included."""
    found = _SERIES.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"not a series selector: {text!r}")
    labels = {"__name__": found["name"]} if found["name"] else {}
    body = found["body"] or ""
    pos = 0
    while pos < len(body.rstrip()):
        pair = _PAIR.match(body, pos)
        if pair is None:
            raise ValueError(f"bad labels in {text!r} at {pos}")
        labels[pair[1]] = json.loads(f'"{pair[2]}"')
        pos = pair.end()
    return labels
