"""Our evaluator against Prometheus's own: every case's answers, as promtool test rules checks them."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.alerting.domain.promql.store import Series, SeriesStore
from tests.unit.alerting.promql.cases import CASES
from tests.unit.alerting.promql.oracle import (
    Case,
    evaluate,
    promtool_or_skip,
    promtool_tests,
    run_promtool,
    write_rules_test,
)


def _promtool_says(
    tmp_path: Path, cases: list[Case], results: list[dict[str, list[tuple[dict[str, str], float]]]]
) -> tuple[int, str]:
    promtool = promtool_or_skip()
    path = write_rules_test(tmp_path / "promql_test.yml", promtool_tests(cases, results))
    ran = run_promtool(promtool, path)
    return ran.returncode, ran.stdout + ran.stderr


def test_promtool_agrees_with_every_answer_of_every_case(tmp_path: Path) -> None:
    code, output = _promtool_says(tmp_path, CASES, [evaluate(c) for c in CASES])
    assert code == 0, f"promtool (Prometheus 2.42) disagrees with our evaluator:\n{output}"
    assert "SUCCESS" in output


def test_the_oracle_fails_on_a_wrong_value_and_names_the_expression(tmp_path: Path) -> None:
    cases = [c for c in CASES if c.expr in ("rate(http_total[5m])", "sum by (node) (temp)")]
    results = [evaluate(c) for c in cases]
    assert cases[0].expr == "rate(http_total[5m])"
    labels, value = results[0]["10m"][0]
    results[0]["10m"][0] = (labels, math.nextafter(value, math.inf))  # one ulp off: still caught
    code, output = _promtool_says(tmp_path, cases, results)
    assert code != 0
    assert 'expr: "rate(http_total[5m])", time: 10m' in output
    assert "sum by (node)" not in output


def test_the_oracle_fails_on_a_missing_or_extra_series(tmp_path: Path) -> None:
    cases = {c.expr: c for c in CASES if c.expr in ("temp > 70", "absent(temp)")}
    results = {expr: evaluate(c) for expr, c in cases.items()}
    assert results["temp > 70"]["10m"]
    results["temp > 70"]["10m"] = results["temp > 70"]["10m"][1:]
    results["absent(temp)"]["4m"] = [({}, 1.0)]
    code, output = _promtool_says(tmp_path, list(cases.values()), list(results.values()))
    assert code != 0
    assert 'expr: "temp > 70", time: 10m' in output
    assert 'expr: "absent(temp)", time: 4m' in output


def _permuted(k: int) -> object:
    original = SeriesStore.named

    def named(self: SeriesStore, name: str) -> Iterator[Series]:
        ordered = list(original(self, name))
        orders = list(itertools.permutations(ordered)) if len(ordered) <= 5 else [ordered[::-1]]
        return iter(orders[k % len(orders)])

    return named


def _canonical(answer: list[tuple[dict[str, str], float]]) -> list[tuple[tuple[tuple[str, str], ...], float]]:
    return sorted((tuple(sorted(labels.items())), value) for labels, value in answer)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_every_case_answers_the_same_in_any_series_order(k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # promtool loads series in random order, so a case is only fair if series order cannot change its bits.
    cases = [c for c in CASES if len(c.series) > 1]
    expected = [evaluate(c) for c in cases]
    monkeypatch.setattr(SeriesStore, "named", _permuted(k))
    for case, before in zip(cases, expected, strict=True):
        after = evaluate(case)
        for at in case.at:
            assert _canonical(after[at]) == _canonical(before[at]), (case.expr, at)


def test_the_cases_cover_every_supported_function_and_aggregation() -> None:
    from services.alerting.domain.promql.compile import AGGREGATIONS, BINARY_OPS
    from services.alerting.domain.promql.functions import SUPPORTED_FUNCTIONS

    text = " ".join(c.expr for c in CASES)
    missing = {f for f in SUPPORTED_FUNCTIONS | AGGREGATIONS if f"{f}(" not in text and f"{f} " not in text}
    assert missing == set()
    assert {op for op in BINARY_OPS if f" {op} " not in text} == set()
