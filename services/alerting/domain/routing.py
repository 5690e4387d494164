"""Routes: which receivers an alert goes to, and with which grouping and timers (Alertmanager-style)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from services.alerting.domain.matchers import Matcher, format_matchers, matches_all

__all__ = ["GROUP_BY_ALL", "Route", "RoutingTree", "group_labels", "route_alert"]

# group_by: ["..."] groups by every label, so each alert is its own group.
GROUP_BY_ALL = "..."


class Route(BaseModel):
    """One route: matchers to receiver; timers default low because a pager should ring within a second."""

    model_config = ConfigDict(frozen=True)

    receiver: str
    matchers: tuple[Matcher, ...] = ()
    group_by: tuple[str, ...] = ("alertname", "node")
    group_wait: timedelta = timedelta(0)
    group_interval: timedelta = timedelta(minutes=1)
    repeat_interval: timedelta = timedelta(hours=4)
    continue_matching: bool = Field(default=False, description="Alertmanager's `continue`.")

    def key(self) -> str:
        """Route part of the group key, as Alertmanager writes it: `{}/{matchers}`."""
        return "{}/{" + format_matchers(self.matchers) + "}" if self.matchers else "{}"


class RoutingTree(BaseModel):
    """An ordered list of routes under a catch-all default, like a one-level Alertmanager tree."""

    model_config = ConfigDict(frozen=True)

    default: Route
    routes: tuple[Route, ...] = ()


def route_alert(tree: RoutingTree, labels: Mapping[str, str]) -> tuple[Route, ...]:
    """Routes that take the alert: the first match, more while `continue` is set, else the default."""
    chosen: list[Route] = []
    for route in tree.routes:
        if matches_all(route.matchers, labels):
            chosen.append(route)
            if not route.continue_matching:
                break
    return tuple(chosen) or (tree.default,)


def group_labels(route: Route, labels: Mapping[str, str]) -> dict[str, str]:
    """The labels that name the alert's group on this route."""
    if GROUP_BY_ALL in route.group_by:
        return dict(labels)
    return {name: labels[name] for name in route.group_by if name in labels}
