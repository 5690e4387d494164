from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.alerting.domain.inhibition import DEFAULT_INHIBIT_RULES, is_inhibited, muter
from services.alerting.domain.matchers import Matcher, MatchOp
from services.alerting.domain.silences import Silence, is_silenced
from tests.unit.alerting.builders import alert
from tests.unit.alerting.clock import at

NODE_A = Silence(
    id="s1",
    matchers=(Matcher(name="node", value="node-a"), Matcher(name="alertname", op=MatchOp.RE, value="Gpu.*")),
    starts_at=at(100),
    ends_at=at(200),
    created_by="ops@example.com",
    comment="maintenance",
)


def test_silence_mutes_matching_alerts_only_inside_its_window() -> None:
    labels = alert().labels
    assert not is_silenced([NODE_A], labels, now=at(99))
    assert is_silenced([NODE_A], labels, now=at(100))
    assert is_silenced([NODE_A], labels, now=at(199.9))
    assert not is_silenced([NODE_A], labels, now=at(200))


def test_silence_leaves_other_nodes_alone() -> None:
    assert not is_silenced([NODE_A], alert(node="node-b").labels, now=at(150))


def test_silence_without_matchers_or_with_a_backwards_window_is_refused() -> None:
    with pytest.raises(ValidationError):
        NODE_A.model_validate({**NODE_A.model_dump(), "matchers": ()})
    with pytest.raises(ValidationError):
        NODE_A.model_validate({**NODE_A.model_dump(), "ends_at": at(50)})


def test_silent_node_inhibits_its_own_gpu_alerts() -> None:
    down = alert("NodeAgentSilent", gpu="")
    assert is_inhibited(DEFAULT_INHIBIT_RULES, alert().labels, firing=[down])


def test_silent_node_does_not_inhibit_other_nodes_or_itself() -> None:
    down = alert("NodeAgentSilent", gpu="")
    assert not is_inhibited(DEFAULT_INHIBIT_RULES, alert(node="node-b").labels, firing=[down])
    assert not is_inhibited(DEFAULT_INHIBIT_RULES, down.labels, firing=[down])


def test_resolved_source_no_longer_inhibits() -> None:
    recovered = alert("NodeAgentSilent", gpu="", ends_at=at(10))
    assert not is_inhibited(DEFAULT_INHIBIT_RULES, alert().labels, firing=[recovered])


def test_muter_combines_silences_and_inhibition() -> None:
    down = alert("NodeAgentSilent", gpu="", node="node-c")
    muted = muter(silences=[NODE_A], inhibit_rules=DEFAULT_INHIBIT_RULES, firing=[down], now=at(150))
    assert muted(alert().labels)
    assert muted(alert(node="node-c").labels)
    assert not muted(alert(node="node-b").labels)
