"""Matcher regexes whose matching time could explode are refused when saved, never run.

Python's `re` backtracks and takes no deadline, so the shapes that make it exponential (a quantifier or
an alternation under a quantifier) or steeply polynomial (many quantifiers in a row) are refused, with
what RE2, Alertmanager's engine, lacks as well (backreferences, lookarounds).
"""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from services.alerting.api.schemas import SilenceIn
from services.alerting.domain.matchers import MAX_PATTERN_LENGTH, Matcher, MatchOp, check_pattern


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("(a+)+$", "a quantified group holds another quantifier"),
        ("(a*)*b", "a quantified group holds another quantifier"),
        ("(a|aa)+", "a quantified group holds another quantifier or an alternation"),
        ("(x+x+)+y", "a quantified group holds another quantifier"),
        ("(?:a?){2,}", "a quantified group holds another quantifier"),
        (".*a.*a.*a.*b", "has 4 quantifiers in a row, more than the 3 allowed"),
        ("(a)\\1", "backreferences are not supported"),
        ("(?=a)a", "lookarounds are not supported"),
        ("(?>a+)b", "atomic groups are not supported"),
        ("a{2}{3}", "multiple repeat"),
        ("a" * (MAX_PATTERN_LENGTH + 1), f"more than the {MAX_PATTERN_LENGTH} allowed"),
    ],
)
def test_a_pattern_that_can_backtrack_without_end_is_refused(pattern: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        check_pattern(pattern)


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("gpu-.*", "gpu-a", True),
        ("A100.*|H100.*", "H100-80GB", True),
        ("node-[0-9]+", "node-12x", False),  # anchored at both ends, as Alertmanager's matchers are
        (".*a.*b.*", "xaxbx", True),
        ("(?:ab)+", "ababa", False),
        ("(a|b)*", "abba", True),
        ("(?i)acme", "ACME", True),
        ("", "", True),
    ],
)
def test_patterns_people_write_for_labels_are_accepted_and_anchored(
    pattern: str, value: str, matches: bool
) -> None:
    check_pattern(pattern)
    assert Matcher(name="node", op=MatchOp.RE, value=pattern).matches({"node": value}) is matches


def test_a_silence_with_a_catastrophic_matcher_is_refused_naming_the_matcher() -> None:
    body = {"matchers": [{"name": "node", "op": "=~", "value": "(a+)+$"}], "ends_at": "2999-01-01T00:00:00Z"}
    with pytest.raises(ValidationError) as caught:
        SilenceIn.model_validate({**body, "comment": "x"})
    first = caught.value.errors()[0]
    assert first["loc"] == ("matchers", 0)
    assert "invalid regular expression '(a+)+$'" in first["msg"]


def test_an_equality_matcher_takes_any_value_as_plain_text() -> None:
    assert Matcher(name="node", value="(a+)+$").matches({"node": "(a+)+$"})
