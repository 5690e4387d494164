"""Label matchers (=, !=, =~, !~) shared by rules, routes, silences and inhibition."""

from __future__ import annotations

import re
import re._parser as _sre  # type: ignore[import-not-found]  # the stdlib's own regex parser; no stub
from collections.abc import Iterable, Mapping
from enum import StrEnum
from functools import lru_cache
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

__all__ = [
    "LABEL_NAME_RE",
    "MAX_PATTERN_LENGTH",
    "MAX_PATTERN_REPEATS",
    "MatchOp",
    "Matcher",
    "check_pattern",
    "format_matchers",
    "matches_all",
    "parse_matchers",
]

LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_MATCHER_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')

#: Python's `re` backtracks and cannot be given a deadline, so a pattern is refused unless its worst
#: case stays small: bounded in length, no quantifier or alternation under a quantifier (`(a+)+`,
#: `(a|aa)*` take exponential time), and at most this many quantifiers one after another (`.*a.*a.*a`
#: takes n^3 steps on a label of n characters).
MAX_PATTERN_LENGTH = 256
MAX_PATTERN_REPEATS = 3
_REPEATS = frozenset({_sre.MAX_REPEAT, _sre.MIN_REPEAT})
# What RE2 (Alertmanager's engine) does not have either: backreferences, lookaround, atomic groups.
_UNSUPPORTED = {
    _sre.GROUPREF: "backreferences",
    _sre.GROUPREF_EXISTS: "conditional groups",
    _sre.ASSERT: "lookarounds",
    _sre.ASSERT_NOT: "lookarounds",
    _sre.ATOMIC_GROUP: "atomic groups",
    _sre.POSSESSIVE_REPEAT: "possessive quantifiers",
}


def _shape(items: Any) -> tuple[int, bool]:
    """(most quantifiers in a row, whether it holds a quantifier or an alternation) of a parsed pattern."""
    degree, ambiguous = 0, False
    for op, arg in items:
        if op in _UNSUPPORTED:
            raise ValueError(f"{_UNSUPPORTED[op]} are not supported")
        if op in _REPEATS:
            inner, nested = _shape(arg[2])
            if arg[1] > 1 and (nested or inner):
                raise ValueError(
                    "a quantified group holds another quantifier or an alternation, "
                    "which can take exponential time: write it without nesting (a+ rather than (a+)+)"
                )
            degree, ambiguous = degree + (1 if arg[1] > 1 else inner), True
        elif op is _sre.SUBPATTERN:
            inner, nested = _shape(arg[3])
            degree, ambiguous = degree + inner, ambiguous or nested
        elif op is _sre.BRANCH:
            shapes = [_shape(branch) for branch in arg[1]]
            degree, ambiguous = degree + max(d for d, _ in shapes), True
    return degree, ambiguous


def check_pattern(pattern: str) -> None:
    """Refuse (ValueError) a matcher regex that does not compile or whose matching time could explode."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"is {len(pattern)} characters long, more than the {MAX_PATTERN_LENGTH} allowed")
    try:
        re.compile(pattern)
        degree, _ = _shape(_sre.parse(pattern))
    except re.error as error:
        raise ValueError(str(error)) from None
    if degree > MAX_PATTERN_REPEATS:
        raise ValueError(
            f"has {degree} quantifiers in a row, more than the {MAX_PATTERN_REPEATS} allowed "
            "(each one multiplies the time a non-matching label takes)"
        )


class MatchOp(StrEnum):
    """Matcher operators, with Prometheus's spelling."""

    EQ = "="
    NE = "!="
    RE = "=~"
    NRE = "!~"


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


class Matcher(BaseModel):
    """One label matcher; a missing label matches as the empty string, as in Prometheus."""

    model_config = ConfigDict(frozen=True)

    name: str
    op: MatchOp = MatchOp.EQ
    value: str

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not LABEL_NAME_RE.fullmatch(name):
            raise ValueError(f"invalid label name {name!r}")
        return name

    @model_validator(mode="after")
    def _valid_regex(self) -> Self:
        # Validate eagerly so a bad regex is refused when the rule is saved, not at evaluation.
        if self.op in (MatchOp.RE, MatchOp.NRE):
            try:
                check_pattern(self.value)
            except ValueError as error:
                raise ValueError(f"invalid regular expression {self.value[:80]!r}: {error}") from None
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether this matcher accepts the label set (regexes are anchored, as in Prometheus)."""
        actual = labels.get(self.name, "")
        if self.op is MatchOp.EQ:
            return actual == self.value
        if self.op is MatchOp.NE:
            return actual != self.value
        found = _compiled(self.value).fullmatch(actual) is not None
        return found if self.op is MatchOp.RE else not found

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.name}{self.op.value}"{escaped}"'


def matches_all(matchers: Iterable[Matcher], labels: Mapping[str, str]) -> bool:
    """True when every matcher accepts the labels (an empty list matches everything)."""
    return all(m.matches(labels) for m in matchers)


def format_matchers(matchers: Iterable[Matcher]) -> str:
    """PromQL selector body: `node="a",tenant!="b"` (empty string for no matchers)."""
    return ",".join(str(m) for m in matchers)


def parse_matchers(text: str) -> tuple[Matcher, ...]:
    """Parse a selector body written by `format_matchers`."""
    if not text.strip():
        return ()
    parts = _split_outside_quotes(text)
    result = []
    for part in parts:
        found = _MATCHER_RE.fullmatch(part)
        if found is None:
            raise ValueError(f"invalid matcher {part!r}")
        value = re.sub(r"\\(.)", r"\1", found.group(3))
        result.append(Matcher(name=found.group(1), op=MatchOp(found.group(2)), value=value))
    return tuple(result)


def _split_outside_quotes(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in text:
        if char == "," and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
        quoted = quoted != (char == '"' and not escaped)
        escaped = char == "\\" and not escaped
    parts.append("".join(current))
    return parts
