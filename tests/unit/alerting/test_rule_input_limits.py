"""Rule input that once gave a 500: non-finite thresholds, durations past any sense, unsafe YAML tags."""

from __future__ import annotations

import math
import re
from datetime import timedelta

import pytest
from pydantic import ValidationError

from libs.common.http import Unprocessable
from libs.common.yaml_safe import YamlRefused
from services.alerting.adapters.rulefile_yaml import parse_rule_file
from services.alerting.api.schemas import RuleIn, rule_from
from services.alerting.domain.durations import MAX_DURATION, DurationOutOfRange, parse_duration
from services.alerting.domain.rules import Rule

RULE = {"name": "Hot", "metric": "gpu_temp_c", "threshold": 80, "for": "1m"}


def rule_file(expr: str, *, for_: str = "1m") -> str:
    return (
        f"groups:\n  - name: g\n    rules:\n      - alert: Hot\n        expr: '{expr}'\n        for: {for_}\n"
    )


@pytest.mark.parametrize("threshold", [math.nan, math.inf, -math.inf])
def test_a_non_finite_threshold_is_refused_by_the_schema_and_the_rule(threshold: float) -> None:
    with pytest.raises(ValidationError) as caught:
        RuleIn.model_validate({**RULE, "threshold": threshold})
    assert caught.value.errors()[0]["loc"] == ("threshold",)
    with pytest.raises(ValidationError, match="finite number"):
        Rule(name="Hot", metric="gpu_temp_c", threshold=threshold)


@pytest.mark.parametrize("field", ["for", "keep_firing_for"])
def test_a_duration_past_the_maximum_is_a_422_naming_the_field_and_the_maximum(field: str) -> None:
    body = RuleIn.model_validate({**RULE, field: "1000000000000h"})
    with pytest.raises(Unprocessable) as caught:
        rule_from(body, owner=None)
    assert caught.value.field == field
    assert "longer than the maximum of 365d" in caught.value.message


def test_durations_are_bounded_at_a_year() -> None:
    assert parse_duration("365d") == MAX_DURATION == parse_duration("1y")
    assert parse_duration("52w") == timedelta(weeks=52)
    with pytest.raises(DurationOutOfRange, match=r"'366d' is longer than the maximum of 365d"):
        parse_duration("366d")
    with pytest.raises(DurationOutOfRange):
        parse_duration("9" * 40 + "ms")


def test_a_rule_file_with_an_endless_for_names_the_maximum() -> None:
    with pytest.raises(
        ValueError, match=r"for: duration '1000000000000h' is longer than the maximum of 365d"
    ):
        parse_rule_file(rule_file("gpucloud_gpu_temp_c > 80", for_="1000000000000h"))


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("gpucloud_gpu_temp_c > NaN", "alert 'Hot': threshold: Input should be a finite number"),
        ("gpucloud_gpu_temp_c > +Inf", "alert 'Hot': threshold: Input should be a finite number"),
        (
            "time() - max by (node) (timestamp(gpucloud_gpu_temp_c)) > +Inf",
            "alert 'Hot': the silence after `>` must be a finite number",
        ),
        (
            "time() - max by (node) (timestamp(gpucloud_gpu_temp_c)) > 1e300",
            "is longer than the maximum of 365d",
        ),
    ],
)
def test_a_rule_file_with_a_non_finite_or_endless_threshold_names_it(expr: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)) as caught:
        parse_rule_file(rule_file(expr))
    assert not isinstance(caught.value, ValidationError)


def test_a_python_tag_in_a_rule_file_is_refused_by_name() -> None:
    text = rule_file("gpucloud_gpu_temp_c > 80").replace(
        "alert: Hot", "alert: !!python/object/apply:os.system [id]"
    )
    with pytest.raises(
        YamlRefused, match=r"tag !!python/object/apply:os.system is not allowed \(.*\) \(line 4"
    ):
        parse_rule_file(text)


def test_an_unsafe_matcher_in_a_rule_file_is_refused_naming_the_alert() -> None:
    with pytest.raises(ValueError, match=r"alert 'Hot': invalid regular expression '\(a\+\)\+\$'"):
        parse_rule_file(rule_file('gpucloud_gpu_temp_c{node=~"(a+)+$"} > 80'))
