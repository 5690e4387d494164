"""Silences: matchers that mute alerts for a time window, with who and why."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, ValidationError, model_validator

from services.alerting.domain.matchers import Matcher, MatchOp, matches_all, parse_matchers

__all__ = [
    "Silence",
    "SilenceState",
    "confine_to_tenant",
    "is_silenced",
    "parse_matcher_list",
    "silence_matches_filter",
]

SilenceState = Literal["expired", "active", "pending"]
# Alertmanager also accepts an unquoted value (`alertname=Foo`), as amtool and rule files write it.
_UNQUOTED_RE = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*([^\",{}]*?)\s*")


class Silence(BaseModel):
    """Mutes matching alerts from `starts_at` (inclusive) until `ends_at` (exclusive)."""

    model_config = ConfigDict(frozen=True)

    id: str
    matchers: tuple[Matcher, ...]
    starts_at: AwareDatetime
    ends_at: AwareDatetime
    created_by: str
    comment: str

    @model_validator(mode="after")
    def _sane(self) -> Self:
        if not self.matchers:
            raise ValueError("a silence needs at least one matcher; it would otherwise mute everything")
        if self.ends_at <= self.starts_at:
            raise ValueError("a silence must end after it starts")
        return self

    def active(self, now: datetime) -> bool:
        """Whether the silence is in force at `now`."""
        return self.starts_at <= now < self.ends_at

    def state(self, now: datetime) -> SilenceState:
        """Alertmanager's silence state at `now`."""
        if now >= self.ends_at:
            return "expired"
        return "pending" if now < self.starts_at else "active"

    def mutes(self, labels: Mapping[str, str], now: datetime) -> bool:
        """Whether it mutes an alert with these labels at `now`."""
        return self.active(now) and matches_all(self.matchers, labels)


def is_silenced(silences: Iterable[Silence], labels: Mapping[str, str], *, now: datetime) -> bool:
    """True when any silence mutes the labels at `now`."""
    return any(s.mutes(labels, now) for s in silences)


def confine_to_tenant(matchers: Iterable[Matcher], tenant: str | None) -> tuple[Matcher, ...]:
    """A tenant's matchers only ever select that tenant's alerts; None (an admin) leaves them as written.

    Raises ValueError naming the index of a `tenant` matcher that reaches beyond the tenant.
    """
    found = tuple(matchers)
    if tenant is None:
        return found
    for i, m in enumerate(found):
        if m.name == "tenant" and not (m.op is MatchOp.EQ and m.value == tenant):
            raise ValueError(f"matchers.{i}: a tenant's matchers are confined to tenant {tenant!r}")
    if Matcher(name="tenant", value=tenant) in found:
        return found
    return (*found, Matcher(name="tenant", value=tenant))


def parse_matcher_list(text: str) -> tuple[Matcher, ...]:
    """Alertmanager's matcher syntax: `a="b",c=~"d.*"`, optionally in braces, values quoted or not."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    try:
        return parse_matchers(body)
    except ValidationError as error:
        raise ValueError(str(error.errors()[0]["msg"]).removeprefix("Value error, ")) from None
    except ValueError:
        pass
    result = []
    for part in body.split(","):
        found = _UNQUOTED_RE.fullmatch(part)
        if found is None:
            raise ValueError(f"bad matcher format: {part.strip()!r}")
        try:
            result.append(Matcher(name=found.group(1), op=MatchOp(found.group(2)), value=found.group(3)))
        except ValidationError as error:
            raise ValueError(str(error.errors()[0]["msg"]).removeprefix("Value error, ")) from None
    return tuple(result)


def silence_matches_filter(silence: Silence, matchers: Iterable[Matcher]) -> bool:
    """Alertmanager's silence filter: the filter matches the labels the silence's equality matchers set."""
    labels = {m.name: m.value for m in silence.matchers if m.op is MatchOp.EQ}
    return matches_all(matchers, labels)
