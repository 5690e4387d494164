"""Pending alerts listed for the API: the `for` deadline on PENDING transitions, how transitions fold into
the list, what an evaluator taking over lists again, and the fake store's list (held to the real one by
tests/integration/alerting/test_engine_state_store_contract.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from services.alerting.adapters.engine_state_store_fake import FakeStateStore
from services.alerting.adapters.rulefile_yaml import parse_rule_file
from services.alerting.adapters.unit_of_work_fake import FakeAlertingUnitOfWork
from services.alerting.domain.alert_lifecycle import (
    AlertState,
    EvaluationConfig,
    Phase,
    Transition,
    TransitionKind,
    pending_writes,
    transition,
)
from services.alerting.domain.engine import Engine
from services.alerting.domain.prometheus_mode import PrometheusMode
from services.alerting.domain.routing import Route, RoutingTree
from services.alerting.domain.rules import Comparator, Rule
from services.alerting.domain.series_evaluation import Sample
from tests.unit.alerting.clock import at

RULE = Rule(
    name="MemHigh",
    metric="fb_used_pct",
    comparator=Comparator.GT,
    threshold=90,
    for_duration=timedelta(seconds=5),
)
TREE = RoutingTree(default=Route(receiver="oncall", group_interval=timedelta(seconds=1)))
LABELS = {"gpu": "GPU-1", "node": "n1", "tenant": "acme"}
OTHER = {"gpu": "GPU-2", "node": "n2", "tenant": "acme"}  # on another node: not in n1's batches
PROM_RULES = """
groups:
  - name: hot
    interval: 10s
    rules:
      - alert: NodeHot
        expr: max by (node) (gpucloud_gpu_temp_c) > 90
        for: 20s
"""


def _engine(rule: Rule = RULE) -> Engine:
    e = Engine(tree=TREE, config=EvaluationConfig(), event_ttl=timedelta(minutes=5))
    e.configure(rules=(rule,), tree=TREE, silences=(), now=at(0))
    return e


def _feed(e: Engine, second: float, pct: float, labels: dict[str, str] = LABELS) -> list[Transition]:
    sample = Sample(labels=labels, values={"fb_used_pct": pct})
    e.observe(node=labels["node"], at=at(second), samples=[sample], now=at(second))
    return e.drain().transitions


def _change(kind: TransitionKind, *, gpu: str = "GPU-1", active: float = 0) -> Transition:
    state = AlertState(phase=Phase.PENDING, active_at=at(active), last_seen=at(active), value=95)
    return transition(kind, rule=RULE, series={**LABELS, "gpu": gpu}, state=state, now=at(active))


def _reading(temp: float) -> dict[str, Any]:
    return {"gpu": "g1", "index": 0, "model": "H100", "gpu_temp_c": temp}


def test_a_pending_transition_says_when_its_for_elapses_and_no_other_kind_does() -> None:
    (pending,) = _feed(e := _engine(), 3, 95)
    assert (pending.kind, pending.alert.starts_at, pending.fires_at) == (TransitionKind.PENDING, at(3), at(8))
    _feed(e, 5, 95)
    (fired,) = _feed(e, 8, 95)
    assert (fired.kind, fired.fires_at) == (TransitionKind.FIRING, None)
    assert _change(TransitionKind.CANCELLED).fires_at is None


def test_transitions_fold_in_order_into_what_to_list_and_what_to_forget() -> None:
    a_pending, a_fired = _change(TransitionKind.PENDING), _change(TransitionKind.FIRING)
    b_cancelled, b_again = (
        _change(TransitionKind.CANCELLED, gpu="GPU-2"),
        _change(TransitionKind.PENDING, gpu="GPU-2"),
    )
    c_resolved = _change(TransitionKind.RESOLVED, gpu="GPU-3")

    writes, forgets = pending_writes([a_pending, b_cancelled, a_fired, b_again, c_resolved])

    assert writes == [b_again]
    assert forgets == [a_fired.alert.fingerprint, c_resolved.alert.fingerprint]
    assert pending_writes([]) == ([], [])


async def test_the_fake_lists_pending_alerts_until_they_fire_or_end_and_keeps_only_committed_ones() -> None:
    store = FakeStateStore()
    uow = FakeAlertingUnitOfWork(store)
    one, two = _change(TransitionKind.PENDING), _change(TransitionKind.PENDING, gpu="GPU-2")
    async with uow:
        await uow.signals.record_pending([one, two])
        await uow.commit()
    async with uow:
        await uow.signals.record_pending([_change(TransitionKind.FIRING)])  # rolled back: still listed
    assert set(store.pending) == {one.alert.fingerprint, two.alert.fingerprint}
    async with uow:
        await uow.signals.record_pending(
            [_change(TransitionKind.FIRING), _change(TransitionKind.CANCELLED, gpu="GPU-2")]
        )
        await uow.commit()
    assert store.pending == {}


async def test_taking_over_lists_exactly_the_restored_pending_alerts_with_the_current_for() -> None:
    first = _engine()
    _feed(first, 0, 95)
    _feed(first, 0, 95, labels=OTHER)
    _feed(first, 1, 40, labels=OTHER)  # cancelled: not pending any more
    series = {k: v for k, v in first.series.items() if v.alerts}  # what the series rows hold
    longer = RULE.model_copy(update={"for_duration": timedelta(seconds=30)})
    successor = _engine(longer)
    successor.restore(series=series, nodes={}, events={}, groups={}, now=at(2))

    (held,) = successor.pending(now=at(2))

    assert (held.kind, held.alert.labels["gpu"], held.alert.starts_at) == (
        TransitionKind.PENDING,
        "GPU-1",
        at(0),
    )
    assert held.fires_at == at(30)
    store = FakeStateStore()
    await store.record_pending([_change(TransitionKind.PENDING, gpu="GPU-9")])  # a predecessor's, unknown now
    await store.replace_pending(successor.pending(now=at(2)))
    assert list(store.pending) == [held.alert.fingerprint]


def test_a_prometheus_mode_pending_alert_fires_at_active_at_plus_for_and_a_replaced_rule_cancels_it() -> None:
    rules = parse_rule_file(PROM_RULES)
    mode = PrometheusMode(settle=timedelta(0))
    mode.configure(rules)
    mode.observe_readings(node="n1", at=at(0), readings=[_reading(95)])
    (pending,) = mode.evaluate(at(0))
    assert (pending.kind, pending.fires_at) == (TransitionKind.PENDING, at(20))

    mode.configure([r.model_copy(update={"for_duration": timedelta(seconds=40)}) for r in rules])
    mode.observe_readings(node="n1", at=at(1), readings=[_reading(95)])
    changes = mode.evaluate(at(5))

    assert [(c.kind, c.alert.fingerprint, c.at) for c in changes] == [
        (TransitionKind.CANCELLED, pending.alert.fingerprint, at(5))
    ]
    mode.configure(mode.rules)  # unchanged rules: nothing ends
    assert mode.evaluate(at(6)) == []
