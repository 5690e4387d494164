from __future__ import annotations

from datetime import timedelta

import pytest
import yaml

from services.alerting.adapters.rulefile_yaml import parse_rule_file, to_yaml
from services.alerting.domain.matchers import Matcher, MatchOp
from services.alerting.domain.promrules import export_rules, expr_for, validate_rule_file
from services.alerting.domain.rules import DEFAULT_RULES, Rule


def by_name(name: str) -> Rule:
    return next(r for r in DEFAULT_RULES if r.name == name)


def test_default_rules_round_trip_through_rule_file_yaml() -> None:
    text = to_yaml(export_rules(DEFAULT_RULES))
    assert parse_rule_file(text) == DEFAULT_RULES


def test_scoped_tenant_rule_with_keep_firing_for_round_trips() -> None:
    rule = by_name("GpuMemoryHigh").model_copy(
        update={
            "matchers": (
                Matcher(name="node", op=MatchOp.RE, value='gpu-"a".*'),
                Matcher(name="pool", value="p,1"),
            ),
            "keep_firing_for": timedelta(minutes=1, seconds=30),
            "owner_tenant": "acme",
            "threshold": 92.5,
        }
    )
    assert parse_rule_file(to_yaml(export_rules([rule]))) == (rule,)


def test_exported_file_passes_the_prometheus_structure_checks() -> None:
    document = yaml.safe_load(to_yaml(export_rules(DEFAULT_RULES, interval="15s")))
    assert validate_rule_file(document) == []
    entry = document["groups"][0]["rules"][0]
    assert set(entry) == {"alert", "expr", "for", "labels", "annotations"}
    assert entry["for"] == "5m"


@pytest.mark.parametrize(
    ("name", "expr"),
    [
        ("GpuMemoryHigh", "gpucloud_fb_used_pct > 90"),
        ("GpuFatalXid", "increase(gpucloud_xid_count[5m]) > 0"),
        ("GpuPowerCapped", "floor(gpucloud_throttle_reasons / 4) % 2 == 1"),
        ("NodeAgentSilent", "time() - max by (node) (timestamp(gpucloud_gpu_temp_c)) > 30"),
    ],
)
def test_expressions_use_the_documented_promql_mapping(name: str, expr: str) -> None:
    assert expr_for(by_name(name)) == expr


def test_selector_matchers_appear_in_the_expression() -> None:
    rule = by_name("GpuTemperatureHigh").model_copy(update={"matchers": (Matcher(name="node", value="a"),)})
    assert expr_for(rule) == 'gpucloud_gpu_temp_c{node="a"} > 85'


def test_validator_reports_what_prometheus_would_refuse() -> None:
    bad = {
        "groups": [
            {"name": "g", "rules": [{"alert": "A", "expr": "", "for": "5 minutes"}]},
            {
                "name": "g",
                "rules": [{"alert": "B", "record": "b", "expr": "x", "labels": {"0bad": "v", "k": 1}}],
            },
            {"name": "", "rules": [{"expr": "up", "annotations": {"ok": "x"}, "bogus": 1}]},
        ]
    }
    errors = "\n".join(validate_rule_file(bad))
    expected = [
        "'expr' must be set",
        "for is not a valid duration",
        "repeated in the same file",
        "exactly one of 'record' and 'alert'",
        "invalid labels name '0bad'",
        "labels 'k' must be a string",
        "name must not be empty",
        "unknown field 'bogus'",
    ]
    assert [needle for needle in expected if needle not in errors] == []


def test_top_level_must_hold_only_groups() -> None:
    assert validate_rule_file({"groups": [], "extra": 1}) != []
    assert validate_rule_file([]) != []


def test_parsing_refuses_an_invalid_file_and_a_foreign_expression() -> None:
    with pytest.raises(ValueError, match="must be set"):
        parse_rule_file("groups: [{name: g, rules: [{alert: A, expr: ''}]}]")
    with pytest.raises(ValueError, match="not one this service writes"):
        parse_rule_file("groups: [{name: g, rules: [{alert: A, expr: 'rate(x[5m]) > 1'}]}]")
