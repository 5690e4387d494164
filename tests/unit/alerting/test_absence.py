from __future__ import annotations

from services.alerting.domain.absence import NodeState, observe_node, tick_node
from services.alerting.domain.alert_lifecycle import EvaluationConfig, TransitionKind
from services.alerting.domain.rules import DEFAULT_RULES
from services.alerting.domain.series_evaluation import Sample
from tests.unit.alerting.clock import at

SILENT = next(r for r in DEFAULT_RULES if r.name == "NodeAgentSilent")
CONFIG = EvaluationConfig()


def heard(gpu_labels: dict[str, str], second: float) -> NodeState:
    step = observe_node(
        state=None, sample=Sample(labels=gpu_labels, values={}), rules=[SILENT], now=at(second)
    )
    assert step.state is not None
    return step.state


def test_node_silent_for_just_under_30s_does_not_fire(gpu_labels: dict[str, str]) -> None:
    step = tick_node(state=heard(gpu_labels, 0), rules=[SILENT], now=at(29.9), config=CONFIG)
    assert step.transitions == ()


def test_node_silent_for_30s_fires_once_with_node_labels(gpu_labels: dict[str, str]) -> None:
    first = tick_node(state=heard(gpu_labels, 0), rules=[SILENT], now=at(30), config=CONFIG)
    assert first.state is not None
    again = tick_node(state=first.state, rules=[SILENT], now=at(31), config=CONFIG)
    assert [t.kind for t in first.transitions] == [TransitionKind.FIRING]
    expected = {"node": "node-a", "pool": "p1", "alertname": "NodeAgentSilent", "severity": "critical"}
    assert first.transitions[0].alert.labels == expected
    assert again.transitions == ()


def test_next_sample_from_the_node_resolves_its_silence_alert(gpu_labels: dict[str, str]) -> None:
    fired = tick_node(state=heard(gpu_labels, 0), rules=[SILENT], now=at(30), config=CONFIG)
    back = observe_node(
        state=fired.state, sample=Sample(labels=gpu_labels, values={}), rules=[SILENT], now=at(45)
    )
    assert [t.kind for t in back.transitions] == [TransitionKind.RESOLVED]
    assert back.transitions[0].alert.ends_at == at(45)
    assert back.state is not None
    assert back.state.alerts == {}


def test_node_silent_past_expiry_is_resolved_and_forgotten(gpu_labels: dict[str, str]) -> None:
    fired = tick_node(state=heard(gpu_labels, 0), rules=[SILENT], now=at(30), config=CONFIG)
    assert fired.state is not None
    gone = tick_node(state=fired.state, rules=[SILENT], now=at(24 * 3600), config=CONFIG)
    assert gone.state is None
    assert [t.kind for t in gone.transitions] == [TransitionKind.RESOLVED]
