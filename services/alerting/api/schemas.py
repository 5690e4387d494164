"""Request and response bodies of the alerting API, and their mapping to domain objects."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from services.alerting.api.errors import domain_error
from services.alerting.domain.durations import format_duration, parse_duration
from services.alerting.domain.matchers import Matcher
from services.alerting.domain.promrules import promql_metric
from services.alerting.domain.routing import RoutingTree
from services.alerting.domain.rules import DEFAULT_GROUP, Comparator, EvaluationMode, Rule, RuleKind, Severity

__all__ = [
    "MatcherIn",
    "ReceiverIn",
    "ReceiverOut",
    "ReceiverUpdate",
    "RoutingTreeIn",
    "RuleIn",
    "RuleOut",
    "SilenceIn",
    "SilenceOut",
    "rule_from",
    "rule_out",
]

_DURATION = "Prometheus duration, e.g. 30s, 5m, 1h30m; at most 365d."
MAX_MATCHERS = 32


def _refusing_unknown_fields(model: type[BaseModel]) -> BeforeValidator:
    """A domain model read from a request: an unknown field, however deep, is a 422 naming it, not dropped.

    The domain models themselves stay lenient (they are also read back from stored configuration).
    """

    def strict(value: Any) -> Any:
        return model.model_validate(value, extra="forbid") if isinstance(value, Mapping) else value

    return BeforeValidator(strict)


#: A label matcher as a request writes it.
MatcherIn = Annotated[Matcher, _refusing_unknown_fields(Matcher)]
#: The routing tree as a request writes it (its routes and their matchers refuse unknown fields too).
RoutingTreeIn = Annotated[RoutingTree, _refusing_unknown_fields(RoutingTree)]


class RuleIn(BaseModel):
    """A rule as written by API users (durations as Prometheus strings)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        max_length=200,
        description="Alert name (an identifier); unique per tenant, and never a global rule's.",
    )
    kind: RuleKind = RuleKind.THRESHOLD
    metric: str = Field(
        default="",
        max_length=64,
        description="Sample field, e.g. fb_used_pct, gpu_temp_c, xid_count, gpu_lost (not for promql rules).",
    )
    expr: str | None = Field(
        default=None, max_length=4096, description="A promql rule's PromQL expression (prometheus mode)."
    )
    mode: EvaluationMode | None = Field(
        default=None, description="stream (default) or prometheus; a promql rule is always prometheus."
    )
    comparator: Comparator = Comparator.GT
    threshold: float = Field(default=0.0, allow_inf_nan=False, description="A finite number.")
    for_: str = Field(default="0s", alias="for", max_length=64, description=_DURATION)
    keep_firing_for: str | None = Field(default=None, max_length=64, description=_DURATION)
    window: str | None = Field(
        default=None, max_length=64, description="Increase window (increase rules). " + _DURATION
    )
    bit: int | None = Field(default=None, ge=0, le=63, description="Test this bit of a bitmask field.")
    matchers: list[MatcherIn] = Field(
        default_factory=list, max_length=MAX_MATCHERS, description="Scope: node, model, pool, tenant..."
    )
    severity: str = Field(
        default=Severity.WARNING.value,
        min_length=1,
        max_length=64,
        description="The severity label: critical, warning, info or any other word.",
    )
    summary: str = Field(default="", max_length=1000, description="A template, as in Prometheus.")
    runbook_url: str | None = Field(default=None, max_length=2048)
    labels: dict[str, Annotated[str, Field(max_length=1000)]] = Field(
        default_factory=dict, max_length=MAX_MATCHERS, description="Other labels the alert carries."
    )
    annotations: dict[str, Annotated[str, Field(max_length=4000)]] = Field(
        default_factory=dict,
        max_length=MAX_MATCHERS,
        description="Other annotations: templates, expanded when notifying.",
    )
    group: str = Field(default=DEFAULT_GROUP, min_length=1, max_length=200, description="Rule group.")
    interval: str | None = Field(default=None, max_length=64, description="Group interval. " + _DURATION)
    owner_tenant: str | None = Field(
        default=None, max_length=200, description="Admins only: make it a tenant's rule."
    )


class RuleOut(BaseModel):
    """A stored rule."""

    name: str
    kind: RuleKind
    metric: str
    comparator: Comparator
    threshold: float
    for_: str = Field(serialization_alias="for")
    keep_firing_for: str | None
    window: str | None
    bit: int | None
    matchers: list[Matcher]
    severity: str
    summary: str
    runbook_url: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    group: str
    interval: str | None
    owner_tenant: str | None
    mode: EvaluationMode
    expr: str | None


def _duration(value: str | None, field: str) -> Any:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise domain_error(exc, prefix=field) from None


def rule_from(body: RuleIn, *, owner: str | None) -> Rule:
    """The domain rule, or a 422 naming the field."""
    fields = body.model_dump(
        exclude={"for_", "keep_firing_for", "window", "interval", "owner_tenant", "mode"}
    )
    if body.kind is RuleKind.PROMQL:
        try:
            fields |= {"metric": promql_metric(body.expr or ""), "mode": EvaluationMode.PROMETHEUS}
        except ValueError as exc:
            raise domain_error(exc, prefix="expr") from None
    else:
        fields["mode"] = body.mode or EvaluationMode.STREAM
    fields |= {
        "for_duration": _duration(body.for_, "for"),
        "interval": _duration(body.interval, "interval"),
        "keep_firing_for": _duration(body.keep_firing_for, "keep_firing_for"),
        "window": _duration(body.window, "window"),
        "owner_tenant": owner,
        "matchers": tuple(body.matchers),
    }
    try:
        return Rule.model_validate(fields)
    except ValidationError as exc:
        raise domain_error(exc) from None


def rule_out(rule: Rule) -> RuleOut:
    """The API view of a rule."""
    return RuleOut(
        **rule.model_dump(exclude={"for_duration", "keep_firing_for", "window", "interval", "matchers"}),
        for_=format_duration(rule.for_duration),
        interval=format_duration(rule.interval) if rule.interval is not None else None,
        keep_firing_for=format_duration(rule.keep_firing_for) if rule.keep_firing_for is not None else None,
        window=format_duration(rule.window) if rule.window is not None else None,
        matchers=list(rule.matchers),
    )


class SilenceIn(BaseModel):
    """A new silence."""

    model_config = ConfigDict(extra="forbid")

    matchers: list[MatcherIn] = Field(
        min_length=1, max_length=MAX_MATCHERS, description="Alerts matching all of these are muted."
    )
    starts_at: datetime | None = Field(default=None, description="Defaults to now.")
    ends_at: datetime = Field(description="When the silence ends.")
    comment: str = Field(min_length=1, max_length=1000)


class SilenceOut(BaseModel):
    """A silence."""

    id: str
    matchers: list[Matcher]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str
    owner_tenant: str | None
    active: bool


class ReceiverIn(BaseModel):
    """A new receiver; `secret` is generated (and shown once) when omitted."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-zA-Z0-9_.-]{1,64}$")
    kind: Literal["webhook", "pagerduty", "slack"]
    url: str | None = Field(default=None, description="Required except for pagerduty (has a default).")
    secret: str | None = Field(default=None, min_length=16, description="HMAC signing secret.")
    routing_key: str | None = Field(default=None, description="PagerDuty integration key.")


class ReceiverUpdate(BaseModel):
    """A receiver's new settings; omitted secrets are kept."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["webhook", "pagerduty", "slack"]
    url: str | None = None
    secret: str | None = Field(default=None, min_length=16)
    routing_key: str | None = None


class ReceiverOut(BaseModel):
    """A receiver without its secrets (a Slack webhook URL is itself a secret and is masked)."""

    name: str
    kind: str
    url: str
    has_routing_key: bool
    created_at: datetime
    signing_secret: str | None = Field(
        default=None, description="Only in the creation response when the service generated it."
    )
