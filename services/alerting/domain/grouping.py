"""Aggregation groups and their timers: when a group's notification is due (group_wait, group_interval,
repeat_interval), with each firing alert notified once and each resolve notified once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict

from services.alerting.domain.alerts import Alert, AlertStatus, fingerprint
from services.alerting.domain.routing import Route, RoutingTree, group_labels, route_alert

__all__ = [
    "AlertGroup",
    "Groups",
    "Muter",
    "Notification",
    "due_notifications",
    "group_key",
    "ingest",
    "route_id",
]

Muter = Callable[[Mapping[str, str]], bool]


class AlertGroup(BaseModel):
    """Alerts sharing a route and group labels, with what was last notified and when the next flush is."""

    model_config = ConfigDict(frozen=True)

    key: str
    route: Route
    labels: dict[str, str]
    alerts: dict[str, Alert] = {}
    created_at: AwareDatetime
    next_flush_at: AwareDatetime
    notified_firing: frozenset[str] = frozenset()
    last_notified_at: AwareDatetime | None = None
    sequence: int = 0


class Notification(BaseModel):
    """One message to one receiver; `id` is stable so the delivery worker can deduplicate retries."""

    model_config = ConfigDict(frozen=True)

    id: str
    receiver: str
    group_key: str
    group_labels: dict[str, str]
    alerts: tuple[Alert, ...]
    created_at: AwareDatetime

    @property
    def status(self) -> AlertStatus:
        """Firing while any alert in it fires."""
        firing = any(a.status is AlertStatus.FIRING for a in self.alerts)
        return AlertStatus.FIRING if firing else AlertStatus.RESOLVED


Groups = dict[str, AlertGroup]


def route_id(tree: RoutingTree, route: Route) -> str:
    """Alertmanager's route ID: the route's key, plus its index among sibling routes with the same key.

    Two routes with the same matchers (say, one to the pager with ``continue`` and one to chat) would
    otherwise share their groups, and only the first route's receiver would ever be notified. A key no
    other route shares stays as it was, so existing groups (and PagerDuty dedup keys) keep their names.
    """
    twins = [r for r in tree.routes if r.key() == route.key()]
    if len(twins) < 2 or route not in twins:
        return route.key()
    return f"{route.key()}/{twins.index(route)}"


def group_key(route: Route, labels: Mapping[str, str], *, tree: RoutingTree) -> str:
    """Alertmanager's groupKey: `{route ID}:{group labels}`, sorted."""
    body = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{route_id(tree, route)}:{{{body}}}"


def ingest(groups: Mapping[str, AlertGroup], *, alert: Alert, tree: RoutingTree, now: datetime) -> Groups:
    """Put a firing or resolved alert into every group its routes select; a new group waits group_wait."""
    updated = dict(groups)
    for route in route_alert(tree, alert.labels):
        labels = group_labels(route, alert.labels)
        key = group_key(route, labels, tree=tree)
        group = updated.get(key)
        if group is None:
            if alert.status is AlertStatus.RESOLVED:
                continue  # a resolve for a group we no longer hold was already notified or never paged
            group = AlertGroup(
                key=key, route=route, labels=labels, created_at=now, next_flush_at=now + route.group_wait
            )
        updated[key] = group.model_copy(update={"alerts": {**group.alerts, alert.fingerprint: alert}})
    return updated


def due_notifications(
    groups: Mapping[str, AlertGroup], *, now: datetime, muted: Muter = lambda _: False
) -> tuple[Groups, tuple[Notification, ...]]:
    """Flush every group whose timer is due; returns the groups after the flush and what to send."""
    updated: Groups = {}
    sent: list[Notification] = []
    for key, group in groups.items():
        if now < group.next_flush_at:
            updated[key] = group
            continue
        after, notification = _flush(group, now=now, muted=muted)
        if notification is not None:
            sent.append(notification)
        if after is not None:
            updated[key] = after
    return updated, tuple(sent)


def _flush(
    group: AlertGroup, *, now: datetime, muted: Muter
) -> tuple[AlertGroup | None, Notification | None]:
    firing = {
        fp: a for fp, a in group.alerts.items() if a.status is AlertStatus.FIRING and not muted(a.labels)
    }
    # A resolve is only news to a receiver that was told about the firing.
    resolved = {
        fp: a
        for fp, a in group.alerts.items()
        if a.status is AlertStatus.RESOLVED and fp in group.notified_firing
    }
    remaining = {fp: a for fp, a in group.alerts.items() if a.status is AlertStatus.FIRING}
    if not remaining and not resolved:
        return None, None
    timer = group.model_copy(update={"next_flush_at": now + group.route.group_interval, "alerts": remaining})
    if not _needs_update(group, firing=set(firing), resolved=bool(resolved), now=now):
        return timer, None
    notification = _notification(group, alerts=(*firing.values(), *resolved.values()), now=now)
    after = timer.model_copy(
        update={"notified_firing": frozenset(firing), "last_notified_at": now, "sequence": group.sequence + 1}
    )
    return (after if remaining else None), notification


def _needs_update(group: AlertGroup, *, firing: set[str], resolved: bool, now: datetime) -> bool:
    if not firing <= group.notified_firing or resolved:
        return True
    last = group.last_notified_at
    return bool(firing) and last is not None and now - last >= group.route.repeat_interval


def _notification(group: AlertGroup, *, alerts: tuple[Alert, ...], now: datetime) -> Notification:
    return Notification(
        id=f"{fingerprint({'key': group.key, 'since': group.created_at.isoformat()})}-{group.sequence + 1}",
        receiver=group.route.receiver,
        group_key=group.key,
        group_labels=group.labels,
        alerts=alerts,
        created_at=now,
    )
