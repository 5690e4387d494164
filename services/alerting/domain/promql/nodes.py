"""The evaluable form of an expression: small frozen nodes, checked and compiled once at parse time."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Aggregate",
    "Binary",
    "Call",
    "Kind",
    "LabelMatcher",
    "Negate",
    "Node",
    "Number",
    "Paren",
    "RangeSelect",
    "Select",
    "Selector",
    "String",
]

Kind = Literal["scalar", "vector", "matrix", "string"]
MatchOp = Literal["=", "!=", "=~", "!~"]


@dataclass(frozen=True, slots=True)
class LabelMatcher:
    """One label matcher; a regex is anchored at both ends, as Prometheus anchors it."""

    name: str
    op: MatchOp
    value: str
    regex: re.Pattern[str] | None = None

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether a series with `labels` satisfies this matcher (a missing label reads as "")."""
        got = labels.get(self.name, "")
        if self.regex is not None:
            return (self.regex.fullmatch(got) is not None) == (self.op == "=~")
        return (got == self.value) == (self.op == "=")


@dataclass(frozen=True, slots=True)
class Selector:
    """A series selector: the metric name it needs, its other matchers, and its offset in ms."""

    metric: str
    matchers: tuple[LabelMatcher, ...]
    offset_ms: int
    #: The labels absent() and absent_over_time() give this selector when it selects nothing.
    absent_labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Number:
    """A number literal."""

    value: float
    kind: Kind = "scalar"


@dataclass(frozen=True, slots=True)
class String:
    """A string literal (only as a function or aggregation parameter)."""

    value: str
    kind: Kind = "string"


@dataclass(frozen=True, slots=True)
class Select:
    """An instant vector selector."""

    selector: Selector
    kind: Kind = "vector"


@dataclass(frozen=True, slots=True)
class RangeSelect:
    """A range vector selector `[range]`."""

    selector: Selector
    range_ms: int
    kind: Kind = "matrix"


@dataclass(frozen=True, slots=True)
class Call:
    """A function call."""

    name: str
    args: tuple[Node, ...]
    kind: Kind


@dataclass(frozen=True, slots=True)
class Aggregate:
    """An aggregation with its by/without labels."""

    op: str
    expr: Node
    param: Node | None
    labels: tuple[str, ...]
    without: bool
    kind: Kind = "vector"


@dataclass(frozen=True, slots=True)
class Binary:
    """A binary operation and its vector matching (card is one-to-one, many-to-one, ...)."""

    op: str
    lhs: Node
    rhs: Node
    return_bool: bool
    card: str
    on: bool
    labels: tuple[str, ...]
    include: tuple[str, ...]
    kind: Kind


@dataclass(frozen=True, slots=True)
class Negate:
    """Unary minus."""

    expr: Node
    kind: Kind


@dataclass(frozen=True, slots=True)
class Paren:
    """Parentheses, kept because absent() and timestamp() look through or at them as Prometheus does."""

    expr: Node
    kind: Kind


Node = Number | String | Select | RangeSelect | Call | Aggregate | Binary | Negate | Paren
