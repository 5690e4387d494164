"""What Query.parse turns away, and how: syntax errors name the problem, refusals name the construct."""

from __future__ import annotations

import pytest

from services.alerting.domain.promql import PromQLError, Query, SeriesStore, UnsupportedPromQL


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("sum(", "unclosed left parenthesis"),
        ('up{job="a"', "unexpected end of input inside braces"),
        ("rate(up)", "expected type matrix in call to function 'rate', got vector"),
        ("up[5m", "unexpected end of input inside brackets"),
        ('up{a=~"("}', "illegal regex"),
        ("nosuchfunction(up)", "unknown function with name 'nosuchfunction'"),
        ("up[5m] + 1", "binary expression must contain only scalar and instant vector types"),
        ("1 == 2", "comparisons between scalars must use BOOL modifier"),
        ("up offset 1m offset 2m", "offset may not be set multiple times"),
        ("up and 1", "set operator 'and' not allowed in binary scalar expression"),
        ('{a=~".*"}', "vector selector must contain at least one non-empty matcher"),
        ("abs(up, up)", "expected 1 argument(s) in call to 'abs', got 2"),
        ("up +", "invalid promql query"),
    ],
)
def test_a_syntax_error_is_a_promql_error_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(PromQLError, match="invalid PromQL") as raised:
        Query.parse(text)
    assert problem in str(raised.value)
    assert text in str(raised.value)
    assert not isinstance(raised.value, UnsupportedPromQL)


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        ("up[5m:1m]", "subqueries"),
        ("max_over_time(rate(up[1m])[5m:])", "subqueries"),
        ("up @ 100", "the @ modifier"),
        ("rate(up[5m] @ end())", "the @ modifier"),
        ("holt_winters(up[5m], 0.5, 0.5)", "holt_winters is not supported"),
        ('label_replace(up, "a", "$1", "b", "(.*)")', "label_replace is not supported"),
        ("deriv(up[5m])", "deriv is not supported"),
        ("histogram_quantile(0.9, up)", "histogram_quantile is not supported"),
        ("limitk(2, up)", "the aggregation limitk is not supported"),
        ("up atan2 up", "the binary operator atan2 is not supported"),
        ('{__name__=~"up|down"}', "a selector without a metric name"),
        ('{job="a"}', "a selector without a metric name"),
        ('up{a="b" or c="d"}', "'or' between matchers"),
        ("up[5m]", "a range vector result"),
        ('"text"', "a string result"),
    ],
)
def test_a_refused_construct_is_unsupported_naming_it(text: str, construct: str) -> None:
    with pytest.raises(UnsupportedPromQL, match="not supported") as raised:
        Query.parse(text)
    assert construct in str(raised.value)


def test_refusal_happens_at_parse_time_so_evaluation_of_what_parsed_never_refuses() -> None:
    query = Query.parse('sum by (a) (rate(up{a=~"x|y"}[5m] offset 1m)) > bool on(a) group_left vector(1)')
    assert query.instant(SeriesStore(), 1_000.0) == []


def test_a_regex_python_cannot_compile_is_a_promql_error_at_parse_time() -> None:
    # RE2 knows Unicode classes (\pL); Python's re does not. Refusing beats matching differently.
    with pytest.raises(PromQLError, match="does not compile"):
        Query.parse(r'up{a=~"\\pL+"}')
