"""YAML from untrusted input: bounded in size, alias expansion and depth, standard tags only.

Every YAML document a service takes over HTTP goes through `load` (or `load_async`, which parses in
a worker thread so a large document never holds up the event loop). The document's events are read
once before anything is built, so a "billion laughs" document (aliases of aliases that expand to
millions of nodes) is refused after reading a few hundred bytes of it, and a `!!python/...` tag is
refused by name instead of surfacing as a constructor traceback. Only PyYAML's safe constructors run.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["DEFAULT_LIMITS", "MIB", "YamlLimits", "YamlRefused", "load", "load_async"]

MIB = 1024 * 1024
# The libyaml parser is ~10x faster than the pure-Python one; both build only plain Python values.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STANDARD = "tag:yaml.org,2002:"
# The tags the safe constructors know; anything else (`!!python/...`, local `!tags`) is refused.
_ALLOWED_TAGS = frozenset(
    {None, "!"}
    | {
        _STANDARD + name
        for name in (
            "null", "bool", "int", "float", "str", "binary", "timestamp",
            "seq", "map", "omap", "pairs", "set", "merge", "value",
        )
    }
)  # fmt: skip
_START = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_END = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


@dataclass(frozen=True, slots=True)
class YamlLimits:
    """What one document may cost: its size, its aliases, what they repeat, and its nesting."""

    max_bytes: int = MIB
    max_aliases: int = 1_000
    #: Nodes that aliases repeat, in total: `*a` where `&a` holds 100 nodes counts 100.
    max_alias_nodes: int = 100_000
    max_depth: int = 64


DEFAULT_LIMITS = YamlLimits()


class YamlRefused(ValueError):
    """A document that is not YAML, or that this parser refuses; the message names the problem."""

    def __init__(self, problem: str, *, line: int | None = None, column: int | None = None) -> None:
        where = f" (line {line}, column {column})" if line is not None and column is not None else ""
        super().__init__(f"{problem}{where}")
        self.problem, self.line, self.column = problem, line, column


def _refuse(problem: str, mark: Any) -> YamlRefused:
    if mark is None:
        return YamlRefused(problem)
    return YamlRefused(problem, line=mark.line + 1, column=mark.column + 1)


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_STANDARD) if tag.startswith(_STANDARD) else tag


class _Budget:
    """Walks the event stream, weighing every node (1 + its children) to price what aliases repeat."""

    def __init__(self, limits: YamlLimits) -> None:
        self._limits = limits
        self._open: list[tuple[str | None, int]] = []  # (anchor, weight so far) of open collections
        self._weights: dict[str, int] = {}
        self._aliases = 0
        self._repeated = 0

    def see(self, event: Any) -> None:
        if isinstance(event, yaml.AliasEvent):
            self._alias(event)
        elif isinstance(event, yaml.ScalarEvent):
            self._tag(event)
            self._close(event.anchor, 1)
        elif isinstance(event, _START):
            self._tag(event)
            self._open.append((event.anchor, 1))
            if len(self._open) > self._limits.max_depth:
                raise _refuse(f"nested deeper than {self._limits.max_depth} levels", event.start_mark)
        elif isinstance(event, _END):
            anchor, weight = self._open.pop()
            self._close(anchor, weight)

    def _tag(self, event: Any) -> None:
        if event.tag not in _ALLOWED_TAGS:
            raise _refuse(
                f"tag {_short_tag(event.tag)} is not allowed (only YAML's standard tags are)",
                event.start_mark,
            )

    def _alias(self, event: Any) -> None:
        self._aliases += 1
        if self._aliases > self._limits.max_aliases:
            raise _refuse(f"more than {self._limits.max_aliases} aliases", event.start_mark)
        if any(anchor == event.anchor for anchor, _ in self._open):
            raise _refuse(f"alias *{event.anchor} refers to a node that contains it", event.start_mark)
        weight = self._weights.get(event.anchor, 0)  # an undefined alias is the composer's to report
        self._repeated += weight
        if self._repeated > self._limits.max_alias_nodes:
            raise _refuse(
                f"aliases expand to more than {self._limits.max_alias_nodes} nodes", event.start_mark
            )
        self._add(weight)

    def _close(self, anchor: str | None, weight: int) -> None:
        if anchor is not None:
            self._weights[anchor] = weight
        self._add(weight)

    def _add(self, weight: int) -> None:
        if self._open:
            anchor, total = self._open[-1]
            self._open[-1] = (anchor, total + weight)


def _check_size(text: str | bytes, limits: YamlLimits) -> None:
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise YamlRefused(f"document is {size} bytes, more than the {limits.max_bytes} allowed")


def load(text: str | bytes, *, limits: YamlLimits = DEFAULT_LIMITS) -> Any:
    """Parse one YAML document into plain Python values, or raise YamlRefused naming the problem."""
    _check_size(text, limits)
    try:
        budget = _Budget(limits)
        for event in yaml.parse(text, Loader=_LOADER):
            budget.see(event)
        return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader, tags checked above
    except YamlRefused:
        raise
    except yaml.MarkedYAMLError as error:
        problem = " ".join(p for p in (error.context, error.problem) if p) or "invalid YAML"
        raise _refuse(problem, error.problem_mark or error.context_mark) from None
    except yaml.YAMLError as error:
        raise YamlRefused("invalid YAML: " + " ".join(str(error).split())) from None
    except (ValueError, TypeError, OverflowError) as error:  # a standard tag's value it cannot build
        raise YamlRefused(f"invalid YAML value: {error}") from None


async def load_async(text: str | bytes, *, limits: YamlLimits = DEFAULT_LIMITS) -> Any:
    """`load` in a worker thread: the event loop keeps serving while a large document parses."""
    return await asyncio.to_thread(load, text, limits=limits)
