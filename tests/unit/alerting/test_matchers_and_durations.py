from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from services.alerting.domain.durations import format_duration, parse_duration
from services.alerting.domain.matchers import Matcher, MatchOp, format_matchers, parse_matchers
from services.alerting.domain.rules import Rule, RuleKind


@pytest.mark.parametrize(
    ("op", "value", "labels", "expected"),
    [
        (MatchOp.EQ, "a", {"node": "a"}, True),
        (MatchOp.NE, "a", {"node": "a"}, False),
        (MatchOp.RE, "a|b", {"node": "b"}, True),
        (MatchOp.RE, "a", {"node": "ab"}, False),
        (MatchOp.NRE, "gpu-.*", {"node": "cpu-1"}, True),
        (MatchOp.EQ, "", {}, True),
    ],
)
def test_matchers_are_anchored_and_treat_missing_labels_as_empty(
    op: MatchOp, value: str, labels: dict[str, str], expected: bool
) -> None:
    assert Matcher(name="node", op=op, value=value).matches(labels) is expected


def test_matchers_round_trip_through_their_text_form() -> None:
    matchers = (Matcher(name="node", op=MatchOp.NE, value='x"y\\z,'), Matcher(name="pool", value="p"))
    assert parse_matchers(format_matchers(matchers)) == matchers


def test_invalid_regex_or_label_name_is_refused_when_saved() -> None:
    with pytest.raises(ValidationError):
        Matcher(name="node", op=MatchOp.RE, value="(")
    with pytest.raises(ValidationError):
        Matcher(name="9node", value="a")


def test_rules_refuse_unknown_metrics_but_match_on_any_label() -> None:
    with pytest.raises(ValidationError, match="unknown metric"):
        Rule(name="X", metric="cpu_pct")
    zoned = Rule(name="X", metric="gpu_temp_c", matchers=(Matcher(name="zone", value="z"),))
    assert zoned.scope() == (Matcher(name="zone", value="z"),)
    with pytest.raises(ValidationError, match="needs a window"):
        Rule(name="X", kind=RuleKind.INCREASE, metric="xid_count")


@pytest.mark.parametrize(
    ("text", "seconds"), [("5m", 300), ("1h30m", 5400), ("0s", 0), ("0", 0), ("1d", 86400)]
)
def test_prometheus_durations_parse(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5 minutes", "m5", "5m1h", "1.5h"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_durations_format_in_their_shortest_spelling() -> None:
    assert format_duration(timedelta(minutes=90)) == "1h30m"
    assert format_duration(timedelta(milliseconds=1500)) == "1s500ms"
