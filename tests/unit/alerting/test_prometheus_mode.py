"""Prometheus mode inside the service: groups on their grid, fed by sample batches, one store per owner.

The evaluation semantics themselves are held to promtool in test_prometheus_mode_oracle.py; these
tests cover what the service adds around them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from services.alerting.adapters.rulefile_yaml import parse_rule_file
from services.alerting.domain.alert_lifecycle import EvaluationConfig, TransitionKind
from services.alerting.domain.engine import Engine
from services.alerting.domain.prometheus_mode import PrometheusMode
from services.alerting.domain.routing import Route, RoutingTree
from services.alerting.domain.rules import EvaluationMode, Rule
from tests.unit.alerting.clock import at

RULES = """
groups:
  - name: hot
    interval: 10s
    rules:
      - alert: NodeHot
        expr: max by (node) (gpucloud_gpu_temp_c) > 90
        for: 20s
        labels: {severity: page}
"""


def _rules(text: str = RULES, *, tenant: str | None = None) -> list[Rule]:
    rules = parse_rule_file(text)
    return [r.model_copy(update={"owner_tenant": tenant}) for r in rules]


def _reading(gpu: str, temp: float, *, tenant: str | None = None) -> dict[str, Any]:
    reading: dict[str, Any] = {"gpu": gpu, "index": 0, "model": "H100", "gpu_temp_c": temp}
    if tenant is not None:
        reading |= {"tenant_id": tenant, "workload_id": "w1"}
    return reading


def _mode(rules: list[Rule]) -> PrometheusMode:
    mode = PrometheusMode(settle=timedelta(0))
    mode.configure(rules)
    return mode


def test_a_promql_group_is_imported_in_prometheus_mode_and_reads_only_the_fields_it_names() -> None:
    (rule,) = _rules()
    assert (rule.kind.value, rule.mode, rule.interval) == (
        "promql",
        EvaluationMode.PROMETHEUS,
        timedelta(seconds=10),
    )
    assert _mode([rule]).fields == {"gpu_temp_c"}


def test_a_group_evaluates_once_per_grid_time_and_for_counts_evaluations() -> None:
    mode = _mode(_rules())
    kinds: list[tuple[float, str]] = []
    for second in range(0, 61):
        mode.observe_readings(node="n1", at=at(second), readings=[_reading("g1", 95)])
        for change in mode.evaluate(at(second + 0.5)):
            kinds.append((change.at.timestamp() - at(0).timestamp(), change.kind.value))
    # Grid times 0, 10, 20...: pending at 0 (active_at), firing at 20 (20 s of `for`), once each.
    assert kinds == [(0.0, "pending"), (20.0, "firing")]


def test_missed_grid_times_are_skipped_and_the_latest_is_evaluated() -> None:
    mode = _mode(_rules())
    mode.observe_readings(node="n1", at=at(0), readings=[_reading("g1", 95)])
    assert [c.kind for c in mode.evaluate(at(0))] == [TransitionKind.PENDING]
    mode.observe_readings(node="n1", at=at(55), readings=[_reading("g1", 95)])
    # 10...50 were missed (a busy evaluator): 50 is evaluated once, and `for` is met there.
    assert [(c.kind, c.at) for c in mode.evaluate(at(55))] == [(TransitionKind.FIRING, at(50))]
    assert mode.evaluate(at(56)) == []


def test_a_series_missing_from_its_nodes_next_batch_is_stale_at_once() -> None:
    mode = _mode(_rules())
    for second in range(0, 31):
        mode.observe_readings(node="n1", at=at(second), readings=[_reading("g1", 95), _reading("g2", 50)])
        mode.evaluate(at(second))
    # g1 leaves the batch at 31: its series is stale from there, not held for the 5-minute lookback.
    mode.observe_readings(node="n1", at=at(31), readings=[_reading("g2", 50)])
    changes = mode.evaluate(at(40))
    assert [(c.kind, c.at) for c in changes] == [(TransitionKind.RESOLVED, at(40))]


def test_a_tenants_rule_sees_only_that_tenants_series() -> None:
    mode = _mode(_rules(tenant="acme"))
    readings = [_reading("g1", 99, tenant="globex"), _reading("g2", 70, tenant="acme")]
    for second in range(0, 41):
        mode.observe_readings(node="n1", at=at(second), readings=readings)
        assert mode.evaluate(at(second)) == []


def test_an_unchanged_rule_keeps_its_alerts_across_a_reload_and_a_changed_one_starts_over() -> None:
    rules = _rules()
    mode = _mode(rules)
    mode.observe_readings(node="n1", at=at(0), readings=[_reading("g1", 95)])
    mode.evaluate(at(0))
    mode.configure(rules)
    mode.observe_readings(node="n1", at=at(20), readings=[_reading("g1", 95)])
    assert [c.kind for c in mode.evaluate(at(20))] == [TransitionKind.FIRING]
    changed = [r.model_copy(update={"for_duration": timedelta(seconds=30)}) for r in rules]
    mode.configure(changed)
    assert mode.evaluations()[0].active == {}


def test_restored_firing_alerts_resolve_when_their_condition_is_gone() -> None:
    tree = RoutingTree(default=Route(receiver="oncall", group_wait=timedelta(0)))
    engine = Engine(tree=tree, config=EvaluationConfig(), event_ttl=timedelta(minutes=5))
    mode = _mode(_rules())
    for second in (0, 10, 20):
        mode.observe_readings(node="n1", at=at(second), readings=[_reading("g1", 95)])
        engine.apply(mode.evaluate(at(second)), now=at(second))
    firing = list(engine.firing.values())
    assert [a.labels["alertname"] for a in firing] == ["NodeHot"]
    # A new evaluator (after a restart) takes the firing alert back from the persisted groups.
    successor = _mode(_rules())
    successor.restore(firing)
    successor.observe_readings(node="n1", at=at(30), readings=[_reading("g1", 50)])
    (change,) = successor.evaluate(at(30))
    assert (change.kind, change.alert.fingerprint) == (TransitionKind.RESOLVED, firing[0].fingerprint)
    assert change.alert.starts_at == firing[0].starts_at


def test_the_stream_engine_ignores_prometheus_mode_rules() -> None:
    tree = RoutingTree(default=Route(receiver="oncall"))
    engine = Engine(tree=tree, config=EvaluationConfig(), event_ttl=timedelta(minutes=5))
    engine.configure(rules=_rules(), tree=tree, silences=(), now=at(0))
    assert engine.rules == ()


def test_a_rule_whose_alerts_would_share_labels_changes_nothing_and_its_error_is_told_once() -> None:
    # The rule's own `gpu` label overrides the series' one: two GPUs' alerts would share their labels,
    # which Prometheus too refuses for the whole evaluation.
    clash = """
groups:
  - name: clash
    interval: 10s
    rules:
      - alert: Clash
        expr: gpucloud_gpu_temp_c > 0
        labels: {severity: page, gpu: all}
"""
    mode = _mode(_rules(clash))
    readings = [_reading("g1", 95), _reading("g2", 96)]
    mode.observe_readings(node="n1", at=at(0), readings=readings)
    assert mode.evaluate(at(0)) == []
    (told,) = mode.new_errors()
    assert told[0] == "Clash"
    assert "same labelset" in told[1]
    mode.observe_readings(node="n1", at=at(10), readings=readings)
    mode.evaluate(at(10))
    assert mode.new_errors() == []  # the same error is told once
