"""Options several commands share, and the small parsers behind them (k=v pairs, durations)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

import typer

from libs.gpuctl.client import ExitCode, GpuctlError

__all__ = ["Tenant", "parse_duration", "parse_pairs", "usage"]

Tenant = Annotated[
    str | None, typer.Option("--tenant", metavar="TENANT", help="Admin keys: act for this tenant.")
]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def usage(message: str, *, field: str | None = None) -> GpuctlError:
    """A mistake in the command line, caught before any request (exit 2)."""
    return GpuctlError(message, exit_code=ExitCode.USAGE, field=field)


def parse_duration(text: str, *, field: str) -> timedelta:
    """``90s``, ``5m``, ``1h30m``, ``2d`` (or plain seconds) as a timedelta."""
    text = text.strip()
    if text.isdigit():
        return timedelta(seconds=int(text))
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise usage(f"{text!r} is not a duration such as 90s, 5m, 1h30m or 2d", field=field)
    return timedelta(seconds=sum(float(n) * _UNIT_S[u] for n, u in parts))


def parse_pairs(items: list[str] | None, *, field: str) -> dict[str, str]:
    """Repeated ``key=value`` options as a mapping; a bad one is named."""
    pairs: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise usage(f"{item!r} is not key=value", field=field)
        pairs[key.strip()] = value
    return pairs
