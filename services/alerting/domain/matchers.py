"""Label matchers (=, !=, =~, !~) shared by rules, routes, silences and inhibition."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from functools import lru_cache
from typing import Self

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

__all__ = ["LABEL_NAME_RE", "MatchOp", "Matcher", "format_matchers", "matches_all", "parse_matchers"]

LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_MATCHER_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


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
                re.compile(self.value)
            except re.error as error:
                raise ValueError(f"invalid regular expression {self.value!r}: {error}") from None
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
