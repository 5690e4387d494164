"""Silences: matchers that mute alerts for a time window, with who and why."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, model_validator

from services.alerting.domain.matchers import Matcher, matches_all

__all__ = ["Silence", "is_silenced"]


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

    def mutes(self, labels: Mapping[str, str], now: datetime) -> bool:
        """Whether it mutes an alert with these labels at `now`."""
        return self.active(now) and matches_all(self.matchers, labels)


def is_silenced(silences: Iterable[Silence], labels: Mapping[str, str], *, now: datetime) -> bool:
    """True when any silence mutes the labels at `now`."""
    return any(s.mutes(labels, now) for s in silences)
