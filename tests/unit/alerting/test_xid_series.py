"""Rules that match on `xid` read one series per GPU and XID code; every other rule reads the GPU's own."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from services.alerting.adapters.rulefile_yaml import parse_rule_file
from services.alerting.domain.alert_lifecycle import EvaluationConfig
from services.alerting.domain.engine import Engine
from services.alerting.domain.grouping import Notification
from services.alerting.domain.promrules import unmatched_labels
from services.alerting.domain.routing import Route, RoutingTree
from services.alerting.domain.rules import DEFAULT_RULES, XID_CODES
from services.alerting.domain.samples import derive, xid_readings
from services.telemetry.domain.xid import XID_DESCRIPTIONS
from tests.unit.alerting.clock import at

TREE = RoutingTree(
    default=Route(receiver="oncall", group_wait=timedelta(0), group_interval=timedelta(seconds=1))
)
FATAL = parse_rule_file(
    """
groups:
  - name: xids
    rules:
      - alert: FatalXid
        expr: increase(gpucloud_xid_count{xid=~"48|79"}[5m]) > 0
        labels: {severity: critical}
"""
)


def _reading(gpu: str, xids: dict[int, int]) -> dict[str, Any]:
    return derive(
        {
            "gpu": gpu,
            "index": 0,
            "model": "H100",
            "xid_count": sum(xids.values()),
            # As on the wire: JSON object keys are strings.
            "xid_counts": {str(code): n for code, n in xids.items()} or None,
            "gpu_temp_c": 50.0,
            "fb_used_bytes": 1,
            "fb_total_bytes": 100,
        }
    )


class Pager:
    def __init__(self, *rules: Any) -> None:
        self.engine = Engine(tree=TREE, config=EvaluationConfig(), event_ttl=timedelta(minutes=5))
        self.engine.configure(rules=rules, tree=TREE, silences=(), now=at(0))
        self.sent: list[Notification] = []

    def readings(self, second: float, *readings: dict[str, Any]) -> None:
        self.engine.observe_readings(node="n1", at=at(second), readings=list(readings), now=at(second))
        self.engine.advance(now=at(second))
        self.sent.extend(self.engine.drain().notifications)

    def firing(self) -> list[dict[str, str]]:
        return [a.labels for n in self.sent for a in n.alerts if n.status.value == "firing"]


def test_every_catalogued_code_has_a_series_from_zero_and_other_codes_once_raised() -> None:
    made = xid_readings([_reading("GPU-1", {999: 2}), {"gpu": "MIG-1", "index": 0, "model": "H100"}])
    assert [(r["xid"], r["xid_count"]) for r in made] == [
        *[(str(code), 0) for code in XID_CODES],
        ("999", 2),
    ]
    assert {r["gpu"] for r in made} == {"GPU-1"}  # a MIG row carries no XIDs: they are the parent's


def test_a_fatal_code_pages_under_its_own_code_and_a_benign_one_does_not() -> None:
    pager = Pager(*FATAL)
    for s in range(5):
        pager.readings(s, _reading("GPU-1", {}), _reading("GPU-2", {}))
    pager.readings(5, _reading("GPU-1", {13: 1}), _reading("GPU-2", {}))
    assert pager.firing() == []
    # The first XID 79 ever: its series stood at 0, so increase() sees it.
    pager.readings(6, _reading("GPU-1", {13: 1, 79: 1}), _reading("GPU-2", {}))
    (labels,) = pager.firing()
    assert (labels["alertname"], labels["gpu"], labels["xid"], labels["severity"]) == (
        "FatalXid",
        "GPU-1",
        "79",
        "critical",
    )


def test_rules_without_an_xid_matcher_read_only_the_gpus_own_series() -> None:
    # The shipped GpuFatalXid (increase of the GPU's total) pages once per GPU, not once per code too.
    pager = Pager(*DEFAULT_RULES, *FATAL)
    for s in range(5):
        pager.readings(s, _reading("GPU-1", {}))
    pager.readings(5, _reading("GPU-1", {79: 1}))
    fired = sorted((labels["alertname"], labels.get("xid", "")) for labels in pager.firing())
    assert ("FatalXid", "79") in fired
    assert [f for f in fired if f[0] != "FatalXid" and f[1]] == []  # no shipped alert on a per-code series


def test_no_per_code_series_exist_without_a_rule_that_reads_them() -> None:
    pager = Pager(*DEFAULT_RULES)
    pager.readings(0, _reading("GPU-1", {79: 1}))
    assert all("xid" not in state.labels for state in pager.engine.series.values())


def test_an_xid_matcher_on_the_xid_metric_is_no_warning_elsewhere_it_is() -> None:
    assert unmatched_labels(FATAL[0]) == []
    (temp,) = parse_rule_file(
        """
groups:
  - name: x
    rules:
      - alert: HotXid
        expr: gpucloud_gpu_temp_c{xid="79"} > 90
"""
    )
    assert len(unmatched_labels(temp)) == 1


def test_the_per_code_series_are_telemetrys_catalog() -> None:
    # Telemetry exports these codes from 0 (DCGM_EXP_XID_ERRORS_TOTAL); alerting's series must be the same.
    assert tuple(sorted(XID_DESCRIPTIONS)) == XID_CODES
