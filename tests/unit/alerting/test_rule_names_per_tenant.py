"""Two tenants may each have a rule of the same name: the engine keeps them apart by owner."""

from __future__ import annotations

from datetime import timedelta

from services.alerting.domain.alert_lifecycle import EvaluationConfig, TransitionKind
from services.alerting.domain.engine import Engine
from services.alerting.domain.routing import Route, RoutingTree
from services.alerting.domain.rules import Rule, RuleBook
from services.alerting.domain.series_evaluation import Sample
from tests.unit.alerting.clock import at

HOT_A = Rule(
    name="Hot", metric="gpu_temp_c", threshold=80, for_duration=timedelta(seconds=2), owner_tenant="a"
)
HOT_B = Rule(
    name="Hot", metric="gpu_temp_c", threshold=60, for_duration=timedelta(seconds=10), owner_tenant="b"
)
TREE = RoutingTree(default=Route(receiver="oncall", group_interval=timedelta(seconds=1)))


def engine() -> Engine:
    e = Engine(tree=TREE, config=EvaluationConfig(), event_ttl=timedelta(minutes=5))
    e.configure(rules=(HOT_A, HOT_B), tree=TREE, silences=(), now=at(0))
    return e


def feed(e: Engine, second: float, tenant: str, temp: float) -> None:
    node = f"n-{tenant}"  # a batch is a node's whole set of GPUs: one tenant's GPU per node here
    labels = {"gpu": f"GPU-{tenant}", "node": node, "tenant": tenant}
    e.observe(
        node=node, at=at(second), samples=[Sample(labels=labels, values={"gpu_temp_c": temp})], now=at(second)
    )


def changes(e: Engine) -> list[tuple[str | None, TransitionKind]]:
    return [(t.alert.labels.get("tenant"), t.kind) for t in e.drain().transitions]


def test_each_tenants_rule_of_one_name_judges_only_its_own_series_with_its_own_for() -> None:
    e = engine()
    feed(e, 0, "a", 85)
    feed(e, 0, "b", 70)
    assert changes(e) == [("a", TransitionKind.PENDING), ("b", TransitionKind.PENDING)]
    feed(e, 2, "a", 85)
    feed(e, 2, "b", 70)
    assert changes(e) == [("a", TransitionKind.FIRING)]  # b's `for` is 10 s, not a's 2 s
    feed(e, 10, "a", 85)
    feed(e, 10, "b", 70)
    assert changes(e) == [("b", TransitionKind.FIRING)]


def test_reloading_the_same_rules_resolves_neither_tenants_alert() -> None:
    e = engine()
    for second in (0, 2):
        feed(e, second, "a", 85)
        feed(e, second, "b", 70)
    e.drain()
    e.configure(rules=(HOT_A, HOT_B), tree=TREE, silences=(), now=at(3))
    e.tick(now=at(3))
    assert changes(e) == []


def test_changing_one_tenants_rule_retires_only_that_tenants_alert() -> None:
    e = engine()
    for second in (0, 2):
        feed(e, second, "a", 85)
    for second in (0, 10):
        feed(e, second, "b", 70)
    e.drain()
    stricter_b = HOT_B.model_copy(update={"threshold": 95.0})
    e.configure(rules=(HOT_A, stricter_b), tree=TREE, silences=(), now=at(11))
    assert changes(e) == [("b", TransitionKind.RESOLVED)]


def test_the_rule_book_finds_a_series_tenants_own_rule_before_a_global_one() -> None:
    global_temp = Rule(name="Temp", metric="gpu_temp_c", threshold=90)
    book = RuleBook((HOT_A, HOT_B, global_temp))
    assert book.get("Hot", {"tenant": "b"}) is HOT_B
    assert book.get("Hot", {"tenant": "c"}) is None
    assert book.get("Hot", {}) is None
    assert book.get("Temp", {"tenant": "a"}) is global_temp
