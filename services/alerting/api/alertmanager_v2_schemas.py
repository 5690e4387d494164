"""Bodies of Alertmanager's API v2 (api/v2/openapi.yaml), as amtool and other on-call tools use them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from services.alerting.domain.matchers import Matcher, MatchOp
from services.alerting.domain.silences import Silence, SilenceState

__all__ = [
    "AlertStatusV2",
    "AlertmanagerStatus",
    "GettableAlert",
    "GettableSilence",
    "MatcherV2",
    "PostableSilence",
    "ReceiverReference",
    "SilenceCreated",
    "gettable_silence",
    "matcher_from_v2",
]

_OPS = {
    (False, True): MatchOp.EQ,
    (False, False): MatchOp.NE,
    (True, True): MatchOp.RE,
    (True, False): MatchOp.NRE,
}


class _V2(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class MatcherV2(_V2):
    """A silence matcher: `isRegex` and `isEqual` together give the operator."""

    name: str
    value: str
    is_regex: bool
    is_equal: bool = True


class PostableSilence(_V2):
    """A silence to create, or to replace when `id` names an existing one."""

    id: str | None = None
    matchers: list[MatcherV2] = Field(min_length=1, max_length=32)
    starts_at: AwareDatetime
    ends_at: AwareDatetime
    created_by: str = Field(max_length=200)
    comment: str = Field(max_length=1000)


class SilenceStatusV2(_V2):
    """Where the silence is in its life."""

    state: SilenceState


class GettableSilence(_V2):
    """A stored silence as Alertmanager reports it."""

    id: str
    status: SilenceStatusV2
    updated_at: datetime
    matchers: list[MatcherV2]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str


class SilenceCreated(_V2):
    """The answer to a created silence."""

    silence_id: str = Field(alias="silenceID")


class ReceiverReference(_V2):
    """A receiver an alert is routed to."""

    name: str


class AlertStatusV2(_V2):
    """Suppressed when silenced or inhibited; who mutes it."""

    state: Literal["unprocessed", "active", "suppressed"]
    silenced_by: list[str]
    inhibited_by: list[str]
    muted_by: list[str] = Field(default_factory=list)


class GettableAlert(_V2):
    """A firing alert as Alertmanager reports it."""

    labels: dict[str, str]
    annotations: dict[str, str]
    receivers: list[ReceiverReference]
    fingerprint: str
    starts_at: datetime
    updated_at: datetime
    ends_at: datetime
    status: AlertStatusV2
    generator_url: str | None = Field(default=None, alias="generatorURL")


class ClusterStatus(_V2):
    """One replica set, no gossip: Alertmanager's "disabled" cluster."""

    status: Literal["ready", "settling", "disabled"] = "disabled"
    name: str = ""
    peers: list[dict[str, str]] = Field(default_factory=list)


class VersionInfo(_V2):
    """What answers: this service, not an Alertmanager build."""

    version: str
    revision: str = ""
    branch: str = ""
    build_user: str = ""
    build_date: str = ""
    go_version: str = Field(default="none (Python)", alias="goVersion")


class AlertmanagerConfig(_V2):
    """The configuration in Alertmanager's YAML (routes' receivers and inhibit rules)."""

    original: str


class AlertmanagerStatus(_V2):
    """`GET /api/v2/status`."""

    cluster: ClusterStatus
    version_info: VersionInfo
    config: AlertmanagerConfig
    uptime: datetime


def matcher_from_v2(matcher: MatcherV2) -> Matcher:
    """Our matcher for an Alertmanager one (ValueError on a bad name or regex)."""
    return Matcher(name=matcher.name, op=_OPS[(matcher.is_regex, matcher.is_equal)], value=matcher.value)


def _v2(matcher: Matcher) -> MatcherV2:
    regex = matcher.op in (MatchOp.RE, MatchOp.NRE)
    equal = matcher.op in (MatchOp.EQ, MatchOp.RE)
    return MatcherV2(name=matcher.name, value=matcher.value, is_regex=regex, is_equal=equal)


def gettable_silence(silence: Silence, *, now: datetime) -> GettableSilence:
    """A silence as Alertmanager reports it; last changed when it started or, once over, when it ended."""
    return GettableSilence(
        id=silence.id,
        status=SilenceStatusV2(state=silence.state(now)),
        updated_at=silence.ends_at if silence.state(now) == "expired" else silence.starts_at,
        matchers=[_v2(m) for m in silence.matchers],
        starts_at=silence.starts_at,
        ends_at=silence.ends_at,
        created_by=silence.created_by,
        comment=silence.comment,
    )
