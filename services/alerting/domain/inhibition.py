"""Inhibition: a firing source alert (a node down) mutes target alerts sharing its `equal` labels."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.alerting.domain.alerts import Alert, AlertStatus
from services.alerting.domain.grouping import Muter
from services.alerting.domain.matchers import Matcher, MatchOp, matches_all
from services.alerting.domain.silences import Silence, confine_to_tenant, is_silenced, parse_matcher_list

__all__ = [
    "DEFAULT_INHIBIT_RULES",
    "MAX_INHIBIT_RULES",
    "InhibitRule",
    "confine_rule",
    "inhibit_rules_from_config",
    "inhibited_by",
    "is_inhibited",
    "muter",
    "to_alertmanager",
]

#: The most inhibit rules one owner (a tenant, or the global set) may store.
MAX_INHIBIT_RULES = 100
_KNOWN_KEYS = frozenset(
    {"source_matchers", "target_matchers", "equal", "source_match", "target_match"}
    | {"source_match_re", "target_match_re"}
)


class InhibitRule(BaseModel):
    """Alertmanager's inhibit_rules entry."""

    model_config = ConfigDict(frozen=True)

    source_matchers: tuple[Matcher, ...]
    target_matchers: tuple[Matcher, ...]
    equal: tuple[str, ...] = Field(default=(), max_length=64)

    def inhibits(self, source: Mapping[str, str], target: Mapping[str, str]) -> bool:
        """Whether `source` mutes `target`; an alert never mutes itself."""
        return (
            source != target
            and matches_all(self.source_matchers, source)
            and matches_all(self.target_matchers, target)
            and all(source.get(name, "") == target.get(name, "") for name in self.equal)
        )


# One fault, one page: the most specific alert pages and mutes its symptoms while it fires.
# - A silent node agent mutes that node's per-GPU alerts.
# - A lost GPU (fallen off the bus: XID 79 or NVML's lost reading) mutes every other alert of that GPU:
#   the XID counter rule, the XID's fault alert, anything its missing readings set off.
# - An XID's own fault alert (it names the code) mutes the XID counter rule of the same GPU.
DEFAULT_INHIBIT_RULES: tuple[InhibitRule, ...] = (
    InhibitRule(
        source_matchers=(Matcher(name="alertname", value="NodeAgentSilent"),),
        target_matchers=(Matcher(name="gpu", op=MatchOp.NE, value=""),),
        equal=("node",),
    ),
    InhibitRule(
        source_matchers=(Matcher(name="alertname", value="GpuLost"),),
        target_matchers=(
            Matcher(name="alertname", op=MatchOp.NE, value="GpuLost"),
            Matcher(name="gpu", op=MatchOp.NE, value=""),
        ),
        equal=("gpu",),
    ),
    InhibitRule(
        source_matchers=(
            Matcher(name="alertname", value="GpuFault"),
            Matcher(name="xid", op=MatchOp.NE, value=""),
        ),
        target_matchers=(Matcher(name="alertname", value="GpuFatalXid"),),
        equal=("gpu",),
    ),
)


def is_inhibited(rules: Iterable[InhibitRule], labels: Mapping[str, str], *, firing: Iterable[Alert]) -> bool:
    """True when some firing alert inhibits an alert with these labels."""
    sources = [a.labels for a in firing if a.status is AlertStatus.FIRING]
    return any(rule.inhibits(src, labels) for rule in rules for src in sources)


def inhibited_by(
    rules: Iterable[InhibitRule], labels: Mapping[str, str], *, firing: Iterable[Alert]
) -> list[str]:
    """Fingerprints of the firing alerts that inhibit these labels (Alertmanager's `inhibitedBy`)."""
    rules = tuple(rules)
    return [
        a.fingerprint
        for a in firing
        if a.status is AlertStatus.FIRING and any(rule.inhibits(a.labels, labels) for rule in rules)
    ]


def confine_rule(rule: InhibitRule, tenant: str) -> InhibitRule:
    """A tenant's rule sources and targets only that tenant's alerts; ValueError if it reaches further."""
    update = {}
    for side in ("source", "target"):
        try:
            update[f"{side}_matchers"] = confine_to_tenant(getattr(rule, f"{side}_matchers"), tenant)
        except ValueError as error:
            raise ValueError(f"{side}_{error}") from None
    return rule.model_copy(update=update)


def _legacy(match: Any, op: MatchOp, key: str) -> list[Matcher]:
    if not isinstance(match, Mapping):
        raise ValueError(f"{key}: a map of label names to values")
    return [Matcher(name=str(k), op=op, value=str(v)) for k, v in match.items()]


def _matchers(entry: Mapping[str, Any], side: str) -> tuple[Matcher, ...]:
    found: list[Matcher] = []
    for i, text in enumerate(entry.get(f"{side}_matchers") or ()):
        if not isinstance(text, str):
            raise ValueError(f'{side}_matchers.{i}: a matcher string such as alertname="NodeDown"')
        try:
            found.extend(parse_matcher_list(text))
        except ValueError as error:
            raise ValueError(f"{side}_matchers.{i}: {error}") from None
    found += _legacy(entry.get(f"{side}_match") or {}, MatchOp.EQ, f"{side}_match")
    found += _legacy(entry.get(f"{side}_match_re") or {}, MatchOp.RE, f"{side}_match_re")
    return tuple(found)


def _rule(entry: Any) -> InhibitRule:
    if not isinstance(entry, Mapping):
        raise ValueError("an inhibit rule is a map with source_matchers, target_matchers and equal")
    unknown = sorted(set(entry) - _KNOWN_KEYS)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    equal = entry.get("equal") or []
    if not isinstance(equal, list) or not all(isinstance(n, str) for n in equal):
        raise ValueError("equal: a list of label names")
    return InhibitRule(
        source_matchers=_matchers(entry, "source"),
        target_matchers=_matchers(entry, "target"),
        equal=tuple(equal),
    )


def inhibit_rules_from_config(doc: Any) -> tuple[InhibitRule, ...]:
    """The `inhibit_rules` of an Alertmanager configuration, or a bare list; ValueError names the entry."""
    entries = doc.get("inhibit_rules") if isinstance(doc, Mapping) else doc
    if not isinstance(entries, list):
        raise ValueError("expected an `inhibit_rules:` list, as in Alertmanager's configuration")
    if len(entries) > MAX_INHIBIT_RULES:
        raise ValueError(f"{len(entries)} inhibit rules, more than the {MAX_INHIBIT_RULES} allowed")
    rules = []
    for i, entry in enumerate(entries):
        try:
            rules.append(_rule(entry))
        except ValidationError as error:
            message = str(error.errors()[0]["msg"]).removeprefix("Value error, ")
            raise ValueError(f"inhibit_rules.{i}: {message}") from None
        except ValueError as error:
            raise ValueError(f"inhibit_rules.{i}: {error}") from None
    return tuple(rules)


def to_alertmanager(rule: InhibitRule) -> dict[str, Any]:
    """The rule as Alertmanager's configuration writes it."""
    return {
        "source_matchers": [str(m) for m in rule.source_matchers],
        "target_matchers": [str(m) for m in rule.target_matchers],
        "equal": list(rule.equal),
    }


def muter(
    *,
    silences: Iterable[Silence],
    inhibit_rules: Iterable[InhibitRule],
    firing: Iterable[Alert],
    now: datetime,
) -> Muter:
    """The mute predicate for `due_notifications`: silenced at `now` or inhibited by a firing alert."""
    silences, rules, alerts = tuple(silences), tuple(inhibit_rules), tuple(firing)
    return lambda labels: is_silenced(silences, labels, now=now) or is_inhibited(rules, labels, firing=alerts)
