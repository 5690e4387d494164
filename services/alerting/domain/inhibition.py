"""Inhibition: a firing source alert (a node down) mutes target alerts sharing its `equal` labels."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from services.alerting.domain.alerts import Alert, AlertStatus
from services.alerting.domain.grouping import Muter
from services.alerting.domain.matchers import Matcher, MatchOp, matches_all
from services.alerting.domain.silences import Silence, is_silenced

__all__ = ["DEFAULT_INHIBIT_RULES", "InhibitRule", "is_inhibited", "muter"]


class InhibitRule(BaseModel):
    """Alertmanager's inhibit_rules entry."""

    model_config = ConfigDict(frozen=True)

    source_matchers: tuple[Matcher, ...]
    target_matchers: tuple[Matcher, ...]
    equal: tuple[str, ...] = ()

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
