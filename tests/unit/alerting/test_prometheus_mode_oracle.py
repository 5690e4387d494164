"""Prometheus mode held to Prometheus itself: Debian's `promtool test rules` (2.42) is the oracle.

Each case is a rule file and input series. Our prometheus mode evaluates the file's rules on the
evaluation grid over those series; what it finds at each eval time (the firing alerts with their
labels and expanded annotations, and the ALERTS / ALERTS_FOR_STATE series: pending and firing state,
`active_at`) is written as the *expected* results of a promtool unit test over the same file and
series. promtool passes only if Prometheus's own rule evaluation finds exactly that, so every case
agrees with Prometheus at every eval time, or the test fails with promtool's account of the difference.
`test_the_oracle_fails_an_off_by_one_for` shows the harness can fail.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from services.alerting.adapters.rulefile_yaml import parse_rule_file
from services.alerting.domain.prometheus_mode import AlertState, RuleEvaluation, rule_query
from services.alerting.domain.promql import STALE_NAN, SeriesStore
from services.alerting.domain.rules import EvaluationMode, Rule
from services.alerting.domain.templates import TemplateContext, expand
from tests.unit.alerting.promql.notation import parse_series
from tests.unit.alerting.promql.oracle import format_labels, promtool_or_skip, run_promtool

Value = float | str | None  # a number, "stale" (a staleness marker) or None (no sample)


@dataclass(frozen=True)
class Case:
    """One rule file over input series, checked at `eval_times` (seconds; on the evaluation grid)."""

    name: str
    rules: str
    series: dict[str, Sequence[Value]]
    eval_times: Sequence[int]
    input_interval: int = 60
    eval_interval: int = 60
    skew: dict[str, timedelta] = field(default_factory=dict)  # rule name -> `for` added (mutations)


def _value_text(value: Value) -> str:
    if value is None:
        return "_"
    if value == "stale":
        return "stale"
    return repr(float(value))


def _rules(case: Case) -> list[Rule]:
    rules = parse_rule_file(case.rules, mode=EvaluationMode.PROMETHEUS)
    return [
        r.model_copy(update={"for_duration": r.for_duration + case.skew[r.name]})
        if r.name in case.skew
        else r
        for r in rules
    ]


def _ours(case: Case) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What our prometheus mode finds at each eval time: promtool alert tests and ALERTS expr tests."""
    store = SeriesStore()
    for selector, values in case.series.items():
        labels = parse_series(selector)
        for i, value in enumerate(values):
            if value is not None:
                store.add(
                    labels, float(i * case.input_interval), STALE_NAN if value == "stale" else float(value)
                )
    evaluations = [RuleEvaluation(rule=r, query=rule_query(r)) for r in _rules(case)]
    alert_tests: list[dict[str, Any]] = []
    expr_tests: list[dict[str, Any]] = []
    checks = sorted(set(case.eval_times))
    for ts in range(0, max(checks) + 1, case.eval_interval):
        for evaluation in evaluations:
            evaluation.evaluate(store, float(ts))
        if ts not in checks:
            continue
        series: list[tuple[dict[str, str], float]] = []
        for evaluation in evaluations:
            series += evaluation.alerts_series()
            alert_tests.append(
                {
                    "eval_time": f"{ts}s",
                    "alertname": evaluation.rule.name,
                    "exp_alerts": [
                        {
                            "exp_labels": {k: v for k, v in a.labels.items() if k != "alertname"},
                            "exp_annotations": {
                                name: expand(text, TemplateContext(labels=a.labels, value=a.value))
                                for name, text in evaluation.rule.all_annotations().items()
                                if text
                            },
                        }
                        for a in evaluation.active.values()
                        if a.state is AlertState.FIRING
                    ],
                }
            )
        for name in ("ALERTS", "ALERTS_FOR_STATE"):
            samples = [
                {"labels": format_labels(labels), "value": value}
                for labels, value in series
                if labels["__name__"] == name
            ]
            expr_tests.append({"expr": name, "eval_time": f"{ts}s", "exp_samples": samples})
    return alert_tests, expr_tests


def _promtool_file(case: Case, directory: Path) -> Path:
    (directory / f"{case.name}.rules.yaml").write_text(case.rules)
    alert_tests, expr_tests = _ours(case)
    test = {
        "rule_files": [f"{case.name}.rules.yaml"],
        "evaluation_interval": f"{case.eval_interval}s",
        "tests": [
            {
                "interval": f"{case.input_interval}s",
                "input_series": [
                    {
                        "series": format_labels(parse_series(selector)),
                        "values": " ".join(_value_text(v) for v in values),
                    }
                    for selector, values in case.series.items()
                ],
                "alert_rule_test": alert_tests,
                "promql_expr_test": expr_tests,
            }
        ],
    }
    path = directory / f"{case.name}.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    return path


def _promtool(paths: Sequence[Path]) -> subprocess.CompletedProcess[str]:
    return run_promtool(promtool_or_skip(), *paths)


def _up(n: int, *, start: float = 0.0, step: float = 1.0) -> list[Value]:
    return [start + i * step for i in range(n)]


TEMP = 'gpucloud_gpu_temp_c{gpu="g1",node="n1"}'
TEMP2 = 'gpucloud_gpu_temp_c{gpu="g2",node="n1"}'
XIDS = 'gpucloud_xid_count{gpu="g1",node="n1"}'

# Every rule names its severity: our alerts always carry one (warning when a rule names none),
# Prometheus's only when the rule sets it (docs/alerting.md lists this difference).
HOT = """
groups:
  - name: hot
    rules:
      - alert: Hot
        expr: gpucloud_gpu_temp_c > 90
        for: 2m
        labels: {severity: page, team: gpu}
        annotations:
          summary: "{{ $labels.gpu }} is at {{ $value }}C"
"""
HOT_NOW = """
groups:
  - name: hot
    rules:
      - alert: HotNow
        expr: gpucloud_gpu_temp_c >= 90
        labels: {severity: page}
"""
KEEP = """
groups:
  - name: keep
    rules:
      - alert: HotKept
        expr: gpucloud_gpu_temp_c > 90
        for: 1m
        keep_firing_for: 3m
        labels: {severity: warning}
        annotations:
          summary: "{{ $labels.gpu }} {{ $value | humanize }}"
"""
WARM = """
groups:
  - name: warm
    rules:
      - alert: Warm
        expr: gpucloud_gpu_temp_c > 90
        for: 30s
        labels: {severity: warning}
        annotations:
          summary: "{{ $labels.gpu }} at {{ $value | humanize }}"
"""
RESETS = """
groups:
  - name: xid
    rules:
      - alert: XidBurst
        expr: increase(gpucloud_xid_count[5m]) > 2
        for: 1m
        labels: {severity: critical}
      - alert: XidRate
        expr: rate(gpucloud_xid_count[3m]) * 60 > 0.5
        labels: {severity: warning}
"""
FLEET = """
groups:
  - name: fleet
    rules:
      - alert: FleetHot
        expr: >-
          avg by (node) (gpucloud_gpu_temp_c) > 80
          and on (node) count by (node) (gpucloud_gpu_temp_c) >= 2
        for: 1m
        labels: {severity: warning}
        annotations:
          summary: "node {{ $labels.node }} averages {{ $value }}"
      - alert: GpuMissing
        expr: absent(gpucloud_gpu_temp_c{gpu="g2"})
        labels: {severity: warning}
      - alert: StaysHot
        expr: min_over_time(gpucloud_gpu_temp_c[3m]) > 85 unless gpucloud_gpu_temp_c offset 2m < 50
        labels: {severity: info}
"""

CASES = [
    # The threshold boundary: 90 is not > 90; `for: 2m` counted in evaluations from the first breach.
    Case(
        "threshold",
        HOT,
        {TEMP: [80, 90, 91, 95, 92, 90, 91, 93, 94, 95, 96, 80]},
        eval_times=range(0, 720, 60),
    ),
    Case("threshold_ge", HOT_NOW, {TEMP: [89, 90, 90.5, 89.9, 90]}, eval_times=range(0, 300, 60)),
    # Flapping: a dip below before `for` elapses starts it over; pending shows in ALERTS.
    Case("flapping", HOT, {TEMP: [95, 80, 95, 95, 80, 95, 95, 95, 95]}, eval_times=range(0, 540, 60)),
    # Gaps: 3 minutes without samples is within the 5m lookback (the last value stands); 7 is not.
    Case(
        "gaps",
        HOT,
        {TEMP: [95, 95, None, None, None, 95, 95, None, None, None, None, None, None, None, 95, 95, 95]},
        eval_times=range(0, 1020, 60),
    ),
    # A staleness marker ends the series at once: pending and firing alerts go.
    Case("stale", HOT, {TEMP: [95, 95, 95, 95, "stale", None, 95, 95, 95, 95]}, eval_times=range(0, 600, 60)),
    # keep_firing_for after a dip and after a stale series.
    Case(
        "keep_dip",
        KEEP,
        {TEMP: [95, 95, 95, 80, 80, 95, 80, 80, 80, 80, 80, 80]},
        eval_times=range(0, 720, 60),
    ),
    Case(
        "keep_stale",
        KEEP,
        {TEMP: [95, 95, 95, "stale", None, None, None, None, None]},
        eval_times=range(0, 540, 60),
    ),
    # Counters with resets (increase/rate), checked every minute over 15s input.
    Case(
        "resets",
        RESETS,
        {
            XIDS: [
                0,
                0,
                1,
                1,
                2,
                3,
                0,
                1,
                2,
                2,
                2,
                5,
                6,
                7,
                0,
                0,
                0,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
                1,
            ]
        },
        input_interval=15,
        eval_times=range(0, 480, 60),
    ),
    # Aggregation, and/unless with on, absent, *_over_time and offset, on a grid offset from the input.
    Case(
        "fleet",
        FLEET,
        {
            TEMP: [70, 82, 86, 88, 90, 91, 90, 40, 90, 92, 93, 94, 95, 96],
            TEMP2: [75, 84, 86, 88, None, None, None, None, None, None, None, 88, 89, 90],
        },
        input_interval=45,
        eval_times=range(0, 600, 30),
        eval_interval=30,
    ),
    # 1 Hz input, evaluated every 15 s: the last sample at or before each grid time counts.
    Case(
        "one_hz",
        WARM,
        {TEMP: [*_up(120, start=60, step=0.3), *([80.0] * 60), *_up(120, start=89, step=0.05)]},
        input_interval=1,
        eval_interval=15,
        eval_times=range(0, 300, 15),
    ),
]


def test_prometheus_mode_agrees_with_promtool_at_every_eval_time(tmp_path: Path) -> None:
    paths = [_promtool_file(case, tmp_path) for case in CASES]
    done = _promtool(paths)
    assert done.returncode == 0, f"promtool disagrees with prometheus mode:\n{done.stdout}\n{done.stderr}"


def test_the_cases_exercise_pending_firing_and_resolution() -> None:
    # The oracle proves agreement only where something happens: each case must fire or hold something.
    for case in CASES:
        alert_tests, expr_tests = _ours(case)
        states = {
            sample["labels"].split("alertstate=")[1].split('"')[1]
            for test in expr_tests
            if test["expr"] == "ALERTS"
            for sample in test["exp_samples"]
        }
        assert "firing" in states, case.name
        fired_at = [t["eval_time"] for t in alert_tests if t["exp_alerts"]]
        assert fired_at, case.name


def test_the_oracle_fails_an_off_by_one_for(tmp_path: Path) -> None:
    # A `for` counted one evaluation late (as `>` for `>=` in the hold check would) must be caught.
    mutated = replace(CASES[0], name="mutated", skew={"Hot": timedelta(seconds=60)})
    done = _promtool([_promtool_file(mutated, tmp_path)])
    assert done.returncode != 0, "promtool accepted a wrong `for`: the oracle cannot fail"
    assert "Hot" in done.stdout + done.stderr


def test_values_written_for_promtool_round_trip() -> None:
    assert _value_text(0.1 + 0.2) == "0.30000000000000004"
    assert float(_value_text(0.1 + 0.2)) == 0.1 + 0.2
    assert math.isnan(STALE_NAN)
