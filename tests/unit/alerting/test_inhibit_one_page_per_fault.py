"""One XID 79 is one fault: one page (GpuLost), the other alerts of the GPU inhibited while it fires."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from services.alerting.domain.alert_lifecycle import EvaluationConfig
from services.alerting.domain.engine import Engine
from services.alerting.domain.grouping import Notification
from services.alerting.domain.inhibition import DEFAULT_INHIBIT_RULES, is_inhibited
from services.alerting.domain.routing import Route, RoutingTree
from services.alerting.domain.rules import DEFAULT_RULES
from services.alerting.domain.samples import derive
from services.alerting.domain.signals import fault_signal
from tests.unit.alerting.builders import alert
from tests.unit.alerting.clock import at

TREE = RoutingTree(default=Route(receiver="oncall", group_interval=timedelta(seconds=1)))
LOST = "GPU has fallen off the bus (XID 79)"


def _engine() -> Engine:
    e = Engine(tree=TREE, config=EvaluationConfig(), event_ttl=timedelta(minutes=5))
    e.configure(rules=DEFAULT_RULES, tree=TREE, silences=(), now=at(0))
    return e


def _answering(gpu: str, *, xids: int = 0) -> dict[str, Any]:
    return derive(
        {
            "gpu": gpu,
            "index": 0,
            "model": "H100-SXM5-80GB",
            "xid_count": xids,
            "gpu_temp_c": 55.0,
            "fb_used_bytes": 10,
            "fb_total_bytes": 100,
            "ecc_dbe_count": 0,
            "throttle_reasons": 0,
        }
    )


def _lost(gpu: str, *, xids: int) -> dict[str, Any]:
    # What the agent sends for a GPU it cannot read: no metrics, the reason, the XID total so far.
    return {"gpu": gpu, "index": 0, "model": "H100-SXM5-80GB", "xid_count": xids, "lost_reason": LOST}


class Pager:
    """The engine fed as the evaluator feeds it, with every notification it sends kept."""

    def __init__(self) -> None:
        self.engine = _engine()
        self.sent: list[Notification] = []

    def readings(self, second: float, *readings: dict[str, Any]) -> None:
        self.engine.observe_readings(node="n1", at=at(second), readings=list(readings), now=at(second))
        self._flush(second)

    def fault(self, second: float, *, kind: str, xid: int | None = None) -> None:
        signal = fault_signal(kind=kind, node="n1", gpu="GPU-1", xid=xid, at=at(second), evidence={})
        self.engine.signal(signal, now=at(second))
        self._flush(second)

    def tick(self, second: float) -> None:
        self.engine.tick(now=at(second))
        self._flush(second)

    def _flush(self, second: float) -> None:
        self.engine.advance(now=at(second))
        self.sent.extend(self.engine.drain().notifications)

    def pages(self) -> list[tuple[str, str]]:
        return [(a.labels["alertname"], n.status.value) for n in self.sent for a in n.alerts]


def _healthy_until(pager: Pager, second: int) -> None:
    for s in range(second):
        pager.readings(s, _answering("GPU-1"), _answering("GPU-2"))


@pytest.mark.parametrize("first", ["signals", "readings"])
def test_one_xid_79_pages_once_with_gpu_lost_whichever_arrives_first(first: str) -> None:
    pager = Pager()
    _healthy_until(pager, 10)
    # The agent's tick: the XID and the lost GPU as faults, and a reading of it lost with the XID counted.
    if first == "signals":
        pager.fault(10, kind="xid", xid=79)
        pager.fault(10, kind="lost")
        pager.readings(10, _lost("GPU-1", xids=1), _answering("GPU-2"))
    else:
        pager.readings(10, _lost("GPU-1", xids=1), _answering("GPU-2"))
        pager.fault(10.2, kind="xid", xid=79)
        pager.fault(10.2, kind="lost")
    for s in range(11, 70):
        pager.readings(s, _lost("GPU-1", xids=1), _answering("GPU-2"))
        pager.tick(s + 0.5)
    assert pager.pages() == [("GpuLost", "firing")]


def test_gpu_lost_keeps_firing_while_the_readings_say_lost_and_resolves_when_the_gpu_answers() -> None:
    pager = Pager()
    _healthy_until(pager, 5)
    pager.fault(5, kind="lost")
    for s in range(6, 120):
        pager.readings(s, _lost("GPU-1", xids=0), _answering("GPU-2"))
        pager.tick(s + 0.5)
    assert pager.pages() == [("GpuLost", "firing")]
    assert "GpuLost" in {a.labels["alertname"] for a in pager.engine.firing.values()}
    pager.readings(120, _answering("GPU-1"), _answering("GPU-2"))
    pager.tick(121)
    assert pager.pages() == [("GpuLost", "firing"), ("GpuLost", "resolved")]


def test_a_lost_reading_fires_gpu_lost_even_before_the_fault_signal_arrives() -> None:
    pager = Pager()
    _healthy_until(pager, 5)
    pager.readings(5, _lost("GPU-1", xids=0), _answering("GPU-2"))
    assert pager.pages() == [("GpuLost", "firing")]


def test_a_lost_gpu_inhibits_the_other_alerts_of_that_gpu_only() -> None:
    lost = alert("GpuLost", gpu="GPU-1")
    for name in ("GpuFatalXid", "GpuFault", "GpuTemperatureHigh"):
        assert is_inhibited(DEFAULT_INHIBIT_RULES, alert(name, gpu="GPU-1").labels, firing=[lost])
    assert not is_inhibited(DEFAULT_INHIBIT_RULES, alert("GpuFatalXid", gpu="GPU-2").labels, firing=[lost])
    assert not is_inhibited(DEFAULT_INHIBIT_RULES, alert("NodeAgentSilent", gpu="").labels, firing=[lost])


def test_two_gpu_lost_alerts_of_one_gpu_do_not_mute_each_other() -> None:
    # Raised by a fault before any sample named the series, then by the series itself: labels differ.
    by_signal = alert("GpuLost", gpu="GPU-1")
    by_series = alert("GpuLost", gpu="GPU-1").model_copy(
        update={"labels": {**by_signal.labels, "model": "H100"}}
    )
    assert not is_inhibited(DEFAULT_INHIBIT_RULES, by_series.labels, firing=[by_signal])
    assert not is_inhibited(DEFAULT_INHIBIT_RULES, by_signal.labels, firing=[by_series])


def test_an_xid_fault_alert_inhibits_the_xid_counter_rule_of_its_gpu() -> None:
    fault = alert("GpuFault", gpu="GPU-1")
    fault = fault.model_copy(update={"labels": {**fault.labels, "xid": "48"}})
    assert is_inhibited(DEFAULT_INHIBIT_RULES, alert("GpuFatalXid", gpu="GPU-1").labels, firing=[fault])
    assert not is_inhibited(DEFAULT_INHIBIT_RULES, fault.labels, firing=[alert("GpuFatalXid", gpu="GPU-1")])


def test_configured_inhibit_rules_replace_the_shipped_set() -> None:
    # An operator who stores an empty set gets every alert of the fault paged, not just GpuLost.
    pager = Pager()
    pager.engine.configure(rules=DEFAULT_RULES, tree=TREE, silences=(), inhibit_rules=(), now=at(0))
    _healthy_until(pager, 10)
    pager.fault(10, kind="xid", xid=79)
    pager.fault(10, kind="lost")
    pager.readings(10, _lost("GPU-1", xids=1), _answering("GPU-2"))
    for s in range(11, 70):
        pager.readings(s, _lost("GPU-1", xids=1), _answering("GPU-2"))
        pager.tick(s + 0.5)
    paged = {name for name, status in pager.pages() if status == "firing"}
    assert "GpuLost" in paged
    assert len(paged) > 1, paged
    # Configuring again without inhibit_rules keeps the set the engine has.
    pager.engine.configure(rules=DEFAULT_RULES, tree=TREE, silences=(), now=at(70))
    assert pager.engine._inhibit == ()
