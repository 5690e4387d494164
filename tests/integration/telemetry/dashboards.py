"""Grafana dashboards as a Prometheus sees their queries: variables resolved and substituted as Grafana does.

The shipped dashboards (deploy/grafana/dashboards) and NVIDIA's DCGM dashboard (its queries kept in
dcgm_dashboard_queries.json, whose `comment` documents the substitution) are read into `Board`s; `expand`
resolves each query variable through Prometheus' label-values API and returns every panel query ready to run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
NVIDIA = Path(__file__).with_name("dcgm_dashboard_queries.json")
#: What Grafana gives these for the provisioned datasource (scrape interval 15 s): $__rate_interval is
#: max($__interval + 15s, 4 x 15s).
BUILTINS = {"__rate_interval": "1m", "__interval": "15s"}
_LABEL_VALUES = re.compile(r"label_values\((?:(?P<selector>.+),\s*)?(?P<label>\w+)\)")
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_SPECIAL = re.compile(r"[$^*{}\[\]'+?.()|]")


@dataclass(frozen=True)
class Variable:
    """A query variable: `label_values(...)` and whether it takes several values (then all of them)."""

    name: str
    query: str
    several: bool


@dataclass(frozen=True)
class Board:
    """A dashboard's query variables, in order, its panel queries (panel title, expression) and the
    queries known to find nothing on our exposition (expression -> why)."""

    name: str
    variables: Sequence[Variable]
    queries: Sequence[tuple[str, str]]
    time_from: str
    expected_empty: Mapping[str, str] = field(default_factory=dict)


#: label, selector (None: every series) -> the label's values (Prometheus' /api/v1/label/<label>/values).
LabelValues = Callable[[str, str | None], Awaitable[list[str]]]


def shipped() -> list[Board]:
    """Every dashboard under deploy/grafana/dashboards."""
    return [_board(p.name, json.loads(p.read_text())) for p in sorted(DASHBOARDS.glob("*.json"))]


def nvidia() -> Board:
    """NVIDIA's DCGM dashboard, as dcgm_dashboard_queries.json keeps it."""
    doc = json.loads(NVIDIA.read_text())
    variables = [_variable(v) for v in doc["variables"]]
    queries = [(q["panel"], q["expr"]) for q in doc["queries"]]
    return Board(doc["title"], variables, queries, doc["time_from"], doc["expected_empty"])


async def expand(board: Board, label_values: LabelValues) -> tuple[dict[str, str], list[str]]:
    """The board's queries with every variable substituted (expression as written -> as run), and the
    variables that resolved to no value."""
    values = dict(BUILTINS) | {"__range": _range(board.time_from)}
    empty: list[str] = []
    for variable in board.variables:
        match = _LABEL_VALUES.fullmatch(variable.query.strip())
        assert match, f"{board.name}: {variable.name} is not a label_values() query: {variable.query}"
        selector = match["selector"] and substitute(match["selector"], values)
        found = sorted(await label_values(match["label"], selector))
        if not found:
            empty.append(f"{board.name}: variable {variable.name} ({variable.query}) has no value")
        values[variable.name] = _formatted(found, several=variable.several)
    return {expr: substitute(expr, values) for _, expr in board.queries}, empty


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``$name`` and ``${name}`` replaced by their value; unknown names are left as written."""
    return _VARIABLE.sub(lambda m: values.get(m[1] or m[2], m[0]), text)


def _formatted(found: list[str], *, several: bool) -> str:
    """As Grafana interpolates for Prometheus: a multi-value variable (here at 'All') as a regex of its
    values, each escaped; a single-value one as its first value."""
    if not several:
        return found[0].replace("\\", "\\\\").replace("'", "\\\\'") if found else ""
    escaped = [_SPECIAL.sub(lambda m: "\\\\" + m[0], v.replace("\\", "\\\\\\\\")) for v in found]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def _range(time_from: str) -> str:
    """A default time range `now-24h` as $__range: its length in seconds."""
    match = re.fullmatch(r"now-(\d+)([smhd])", time_from)
    assert match, time_from
    return f"{int(match[1]) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400}[match[2]]}s"


def _board(name: str, doc: dict[str, Any]) -> Board:
    variables = [_variable(v) for v in doc["templating"]["list"] if v["type"] == "query"]
    queries = [(p["title"], t["expr"]) for p in doc["panels"] for t in p.get("targets", [])]
    return Board(name, variables, queries, doc["time"]["from"])


def _variable(v: dict[str, Any]) -> Variable:
    query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
    return Variable(v["name"], query, bool(v.get("multi") or v.get("includeAll")))
