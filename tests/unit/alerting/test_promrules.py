from __future__ import annotations

import re
from datetime import timedelta

import pytest
import yaml

from services.alerting.adapters.rulefile_yaml import parse_rule_file, to_yaml
from services.alerting.domain.alerts import alert_labels
from services.alerting.domain.matchers import Matcher, MatchOp
from services.alerting.domain.promrules import export_rules, expr_for, same_condition, validate_rule_file
from services.alerting.domain.routing import Route, RoutingTree, route_alert
from services.alerting.domain.rules import DEFAULT_RULES, EvaluationMode, Rule


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
    shipped = [r.model_copy(update={"interval": timedelta(seconds=15)}) for r in DEFAULT_RULES]
    document = yaml.safe_load(to_yaml(export_rules(shipped)))
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
    with pytest.raises(ValueError, match="selects x: this service's series are gpucloud_"):
        parse_rule_file("groups: [{name: g, rules: [{alert: A, expr: 'rate(x[5m]) > 1'}]}]")
    with pytest.raises(ValueError, match="subquer"):
        parse_rule_file(
            "groups: [{name: g, rules: [{alert: A, expr: 'max_over_time(gpucloud_power_w[5m:1m]) > 1'}]}]"
        )
    with pytest.raises(ValueError, match="not one stream mode evaluates"):
        parse_rule_file(
            "groups: [{name: g, rules: [{alert: A, expr: 'rate(gpucloud_xid_count[5m]) > 1'}]}]",
            mode=EvaluationMode.STREAM,
        )


PROMETHEUS_FILE = """
groups:
  - name: gpu-health
    interval: 15s
    rules:
      - alert: GpuRunningHot
        expr: gpucloud_gpu_temp_c{pool=~"a|b"} > 80
        for: 1m
        labels:
          severity: page
          team: gpu-infra
        annotations:
          summary: "{{ $labels.gpu }} is at {{ $value | humanize }}C"
          description: "in {{ $externalLabels.cluster }}"
          runbook_url: https://runbooks.example/hot
  - name: gpu-memory
    rules:
      - alert: GpuMemoryAlmostFull
        expr: gpucloud_fb_used_pct > 95
"""


def test_prometheus_rule_file_keeps_every_label_annotation_group_and_interval() -> None:
    hot, memory = parse_rule_file(PROMETHEUS_FILE)
    assert (hot.severity, hot.labels, hot.group, hot.interval) == (
        "page",
        {"team": "gpu-infra"},
        "gpu-health",
        timedelta(seconds=15),
    )
    assert hot.all_annotations() == {
        "summary": "{{ $labels.gpu }} is at {{ $value | humanize }}C",
        "runbook_url": "https://runbooks.example/hot",
        "description": "in {{ $externalLabels.cluster }}",
    }
    assert (memory.group, memory.interval, memory.severity) == ("gpu-memory", None, "warning")
    exported = yaml.safe_load(to_yaml(export_rules([hot, memory])))
    assert [(g["name"], g.get("interval")) for g in exported["groups"]] == [
        ("gpu-health", "15s"),
        ("gpu-memory", None),
    ]
    assert exported["groups"][0]["rules"][0]["labels"] == {"team": "gpu-infra", "severity": "page"}
    assert parse_rule_file(to_yaml(exported)) == (hot, memory)


def test_alerts_of_an_imported_rule_carry_its_labels_and_route_on_them() -> None:
    (hot, _) = parse_rule_file(PROMETHEUS_FILE)
    labels = alert_labels(hot, {"gpu": "GPU-1", "node": "n1", "severity": "ignored"})
    assert labels == {
        "gpu": "GPU-1",
        "node": "n1",
        "team": "gpu-infra",
        "severity": "page",
        "alertname": "GpuRunningHot",
    }
    infra = Route(receiver="infra", matchers=(Matcher(name="team", value="gpu-infra"),))
    tree = RoutingTree(default=Route(receiver="default"), routes=(infra,))
    assert route_alert(tree, labels) == (infra,)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "groups: [{name: g, rules: [{record: 'job:temp:max', expr: 'max(gpucloud_gpu_temp_c)'}]}]",
            "recording rule 'job:temp:max' (record:) is not supported",
        ),
        (
            "groups: [{name: g, rules: [{alert: Hot, expr: gpucloud_gpu_temp_c > 80,"
            " annotations: {description: '{{ $labels.gpu | humanise }}'}}]}]",
            "alert 'Hot': annotation 'description': template does not parse: "
            'function "humanise" not defined',
        ),
        (
            "groups: [{name: a, rules: [{alert: Hot, expr: gpucloud_gpu_temp_c > 80}]},"
            " {name: b, rules: [{alert: Hot, expr: gpucloud_gpu_temp_c > 90}]}]",
            "alert 'Hot' is defined more than once in the file",
        ),
        (
            "groups: [{name: g, rules: [{alert: Hot, expr: gpucloud_gpu_temp_c > 80,"
            " labels: {gpu: '{{ $labels.node }}'}}]}]",
            "templates in labels are not supported",
        ),
    ],
)
def test_rule_files_we_cannot_honour_are_refused_by_rule_name(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_rule_file(text)


def test_same_condition_under_another_name_is_detected() -> None:
    memory = by_name("GpuMemoryHigh")
    assert same_condition(memory.model_copy(update={"name": "MemoryHigh", "severity": "page"}), memory)
    assert not same_condition(memory.model_copy(update={"name": "MemoryHigh", "threshold": 95.0}), memory)
