"""The differential harness: our answers written as a promtool unit-test file, for promtool to check.

Each case feeds our SeriesStore the points promtool's `input_series` describe, evaluates our Query at
its eval times, and writes OUR results as `exp_samples`; `promtool test rules` then evaluates the same
expressions with Prometheus's engine and fails, naming the expression, on any difference.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.alerting.domain.durations import parse_duration
from services.alerting.domain.promql import Query, SeriesStore
from tests.unit.alerting.promql.notation import expand_values, parse_series

__all__ = ["Case", "evaluate", "promtool_or_skip", "promtool_tests", "run_promtool", "write_rules_test"]

Result = list[tuple[dict[str, str], float]]


@dataclass(frozen=True, slots=True)
class Case:
    """One expression over some input series (promtool notation), checked at each of `at`."""

    expr: str
    series: tuple[tuple[str, str], ...]
    at: tuple[str, ...]
    interval: str = "1m"


def _seconds(duration: str) -> float:
    return parse_duration(duration).total_seconds()


def feed(case: Case) -> SeriesStore:
    """A store holding the case's input series, one point per interval from t=0, gaps left out."""
    store = SeriesStore()
    step = _seconds(case.interval)
    for selector, values in case.series:
        labels = parse_series(selector)
        for i, value in enumerate(expand_values(values)):
            if value is not None:
                store.add(labels, i * step, value)
    return store


def evaluate(case: Case) -> dict[str, Result]:
    """Our answer at each eval time of the case."""
    query = Query.parse(case.expr)
    store = feed(case)
    return {at: query.instant(store, _seconds(at)) for at in case.at}


def format_labels(labels: dict[str, str]) -> str:
    """promtool's `name{a="b"}` form (json.dumps quotes as Go's strconv.Quote does for our label values)."""
    name = labels.get("__name__", "")
    rest = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{rest}}}"


def _sample(labels: dict[str, str], value: float) -> dict[str, Any]:
    if math.isnan(value):
        raise AssertionError(f"a NaN result ({labels}) cannot be compared by promtool: change the case")
    return {"labels": format_labels(labels), "value": value}


def promtool_tests(cases: Iterable[Case], results: Iterable[dict[str, Result]]) -> list[dict[str, Any]]:
    """One promtool test per case, its expected samples being our results."""
    tests = []
    for case, by_time in zip(cases, results, strict=True):
        tests.append(
            {
                "interval": case.interval,
                "input_series": [{"series": s, "values": v} for s, v in case.series],
                "promql_expr_test": [
                    {"expr": case.expr, "eval_time": at, "exp_samples": [_sample(*s) for s in samples]}
                    for at, samples in by_time.items()
                ],
            }
        )
    return tests


def write_rules_test(path: Path, tests: list[dict[str, Any]]) -> Path:
    """A promtool rules-test file; floats are written by repr, so they reach promtool bit for bit."""
    document = {"rule_files": [], "evaluation_interval": "1m", "tests": tests}
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=1_000))
    return path


def promtool_or_skip() -> str:
    """promtool's path; skip without it, except under CI, where its absence fails the test."""
    promtool = shutil.which("promtool")
    if promtool is None:
        reason = (
            "promtool is not installed (scripts/ensure-prometheus-tools.sh installs it; make test runs it)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"under CI the PromQL oracle must run: {reason}")
        pytest.skip(reason)
    return promtool


def run_promtool(promtool: str, *paths: Path) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` on test files of one directory (their `rule_files` are found beside them):
    exit 0 when every expression and alert matched."""
    return subprocess.run(
        [promtool, "test", "rules", *[p.name for p in paths]],
        cwd=paths[0].parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
