"""The metrics a rule may name are the sample's: a field added to the wire is a field rules can use."""

from __future__ import annotations

from libs.common.events.sample_wire import METRIC_FIELDS
from services.alerting.domain.rules import METRICS


def test_rules_know_every_metric_field_of_a_sample_and_the_derived_ones() -> None:
    assert {*METRIC_FIELDS, "xid_count", "fb_used_pct"} == METRICS
    assert "tensor_active_pct" in METRICS
