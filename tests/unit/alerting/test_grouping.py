from __future__ import annotations

from datetime import timedelta

from services.alerting.domain.alerts import AlertStatus
from services.alerting.domain.grouping import Groups, Notification, due_notifications, group_key, ingest
from services.alerting.domain.matchers import Matcher
from services.alerting.domain.routing import Route, RoutingTree, route_alert
from tests.unit.alerting.builders import alert, tree
from tests.unit.alerting.clock import at

TREE = tree(repeat_interval=timedelta(hours=1))


def flush(groups: Groups, second: float) -> tuple[Groups, tuple[Notification, ...]]:
    return due_notifications(groups, now=at(second))


def test_new_group_waits_group_wait_before_its_first_notification() -> None:
    groups = ingest({}, alert=alert(), tree=TREE, now=at(0))
    _, early = flush(groups, 29.9)
    _, due = flush(groups, 30)
    assert early == ()
    assert [n.status for n in due] == [AlertStatus.FIRING]


def test_alerts_arriving_during_group_wait_share_one_notification() -> None:
    groups = ingest({}, alert=alert(gpu="GPU-1"), tree=TREE, now=at(0))
    groups = ingest(groups, alert=alert(gpu="GPU-2"), tree=TREE, now=at(10))
    _, sent = flush(groups, 30)
    assert len(sent) == 1
    assert {a.labels["gpu"] for a in sent[0].alerts} == {"GPU-1", "GPU-2"}
    assert sent[0].group_labels == {"alertname": "GpuMemoryHigh", "node": "node-a"}


def test_firing_alert_is_notified_once_not_at_every_group_interval() -> None:
    groups, first = flush(ingest({}, alert=alert(), tree=TREE, now=at(0)), 30)
    groups, second = flush(groups, 330)
    assert len(first) == 1
    assert second == ()


def test_new_alert_in_a_notified_group_waits_for_the_next_group_interval() -> None:
    groups, _ = flush(ingest({}, alert=alert(), tree=TREE, now=at(0)), 30)
    groups = ingest(groups, alert=alert(gpu="GPU-2"), tree=TREE, now=at(40))
    groups, early = flush(groups, 329)
    _, due = flush(groups, 330)
    assert early == ()
    assert len(due) == 1
    assert len(due[0].alerts) == 2


def test_resolve_is_notified_once_and_then_the_group_is_gone() -> None:
    groups, _ = flush(ingest({}, alert=alert(), tree=TREE, now=at(0)), 30)
    groups = ingest(groups, alert=alert(ends_at=at(100)), tree=TREE, now=at(100))
    groups, sent = flush(groups, 330)
    assert [n.status for n in sent] == [AlertStatus.RESOLVED]
    assert sent[0].alerts[0].ends_at == at(100)
    assert groups == {}


def test_alert_resolved_before_it_was_ever_notified_sends_nothing() -> None:
    groups = ingest({}, alert=alert(), tree=TREE, now=at(0))
    groups = ingest(groups, alert=alert(ends_at=at(5)), tree=TREE, now=at(5))
    groups, sent = flush(groups, 30)
    assert sent == ()
    assert groups == {}


def test_firing_alert_is_repeated_after_repeat_interval_at_the_next_flush() -> None:
    groups, _ = flush(ingest({}, alert=alert(), tree=TREE, now=at(0)), 30)
    for second in range(330, 3600, 300):
        groups, quiet = flush(groups, second)
        assert quiet == ()
    groups, repeat = flush(groups, 3630)
    assert len(repeat) == 1


def test_notification_ids_are_distinct_per_flush_and_stable_in_content() -> None:
    groups, first = flush(ingest({}, alert=alert(), tree=TREE, now=at(0)), 30)
    groups = ingest(groups, alert=alert(ends_at=at(60)), tree=TREE, now=at(60))
    _, second = flush(groups, 330)
    assert first[0].id != second[0].id
    assert first[0].id.endswith("-1")
    assert second[0].id.endswith("-2")


def test_zero_group_wait_notifies_on_the_same_instant() -> None:
    instant = tree(group_wait=timedelta(0))
    _, sent = flush(ingest({}, alert=alert(), tree=instant, now=at(7)), 7)
    assert len(sent) == 1


def test_muted_alert_is_left_out_until_unmuted() -> None:
    groups = ingest({}, alert=alert(), tree=TREE, now=at(0))
    groups, muted = due_notifications(groups, now=at(30), muted=lambda labels: True)
    _, unmuted = due_notifications(groups, now=at(330))
    assert muted == ()
    assert len(unmuted) == 1


def test_first_matching_route_wins_unless_it_continues() -> None:
    pager = Route(
        receiver="pager", matchers=(Matcher(name="severity", value="critical"),), continue_matching=True
    )
    slack = Route(receiver="slack", matchers=(Matcher(name="alertname", value="GpuMemoryHigh"),))
    never = Route(receiver="never")
    routing = RoutingTree(default=Route(receiver="default"), routes=(pager, slack, never))
    assert [r.receiver for r in route_alert(routing, alert().labels)] == ["pager", "slack"]
    assert [r.receiver for r in route_alert(RoutingTree(default=Route(receiver="d")), {})] == ["d"]


def test_group_key_follows_alertmanagers_format() -> None:
    route = Route(receiver="pager", matchers=(Matcher(name="severity", value="critical"),))
    key = group_key(route, {"node": "a", "alertname": "X"}, tree=RoutingTree(default=route, routes=(route,)))
    assert key == '{}/{severity="critical"}:{alertname="X", node="a"}'


def test_two_routes_with_the_same_matchers_each_notify_their_own_receiver() -> None:
    critical = (Matcher(name="severity", value="critical"),)
    pager = Route(receiver="pager", matchers=critical, continue_matching=True, group_wait=timedelta(0))
    chat = Route(receiver="chat", matchers=critical, group_wait=timedelta(0))
    routing = RoutingTree(default=Route(receiver="default"), routes=(pager, chat))
    groups = ingest({}, alert=alert(), tree=routing, now=at(0))
    _, sent = due_notifications(groups, now=at(0))
    assert sorted(n.receiver for n in sent) == ["chat", "pager"]
    assert len({n.group_key for n in sent}) == 2
    # A route whose key no sibling shares keeps Alertmanager's plain key (groups keep their names).
    alone = RoutingTree(default=Route(receiver="default"), routes=(pager,))
    only_key = next(iter(ingest({}, alert=alert(), tree=alone, now=at(0))))
    assert only_key.startswith('{}/{severity="critical"}:')


def test_groups_survive_a_json_round_trip() -> None:
    groups, _ = flush(ingest({}, alert=alert(), tree=TREE, now=at(0)), 30)
    group = next(iter(groups.values()))
    assert type(group).model_validate_json(group.model_dump_json()) == group
