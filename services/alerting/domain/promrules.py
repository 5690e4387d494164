"""Prometheus rule files: export rules as a `groups:` document and read back the rules this module writes.

The YAML text itself is read and written by `adapters/rulefile_yaml.py`.

Metric mapping: sample field `f` is exposed as `gpucloud_f` with the sample's labels. Expressions:
    threshold   gpucloud_fb_used_pct{node="a"} > 90
    bit         floor(gpucloud_throttle_reasons / 4) % 2 == 1          (PromQL has no bitwise and)
    increase    increase(gpucloud_xid_count[5m]) > 0
    absent      time() - max by (node) (timestamp(gpucloud_gpu_temp_c)) > 30    (with `for: 0s`)
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from services.alerting.domain.durations import format_duration, parse_duration
from services.alerting.domain.matchers import format_matchers, parse_matchers
from services.alerting.domain.promql import PromQLError, Query
from services.alerting.domain.rulefile import validate_rule_file
from services.alerting.domain.rules import (
    GPU_LOST_METRIC,
    METRICS,
    SCOPE_LABELS,
    XID_LABEL,
    Comparator,
    EvaluationMode,
    Rule,
    RuleKind,
    Severity,
)

__all__ = [
    "METRIC_PREFIX",
    "condition_key",
    "export_rules",
    "expr_for",
    "group_mode",
    "promql_metric",
    "rules_from_document",
    "same_condition",
    "unmatched_labels",
    "validate_rule_file",
]

METRIC_PREFIX = "gpucloud_"
_SEL = r"gpucloud_(?P<metric>[a-z_]+)(?:\{(?P<sel>.*)\})?"
_TAIL = r"\s*(?P<cmp>>=|<=|==|!=|>|<)\s*(?P<thr>[-+0-9.eE]+|[-+]?Inf|NaN)"
_FORMS = (
    (RuleKind.ABSENT, re.compile(rf"time\(\) - max by \(node\) \(timestamp\({_SEL}\)\){_TAIL}")),
    (RuleKind.INCREASE, re.compile(rf"increase\({_SEL}\[(?P<window>[0-9a-z]+)\]\){_TAIL}")),
    (RuleKind.THRESHOLD, re.compile(rf"floor\({_SEL} / (?P<div>\d+)\) % 2{_TAIL}")),
    (RuleKind.THRESHOLD, re.compile(rf"{_SEL}{_TAIL}")),
)


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _selector(rule: Rule) -> str:
    body = format_matchers(rule.matchers)
    return f"{METRIC_PREFIX}{rule.metric}" + (f"{{{body}}}" if body else "")


def expr_for(rule: Rule) -> str:
    """The PromQL expression equivalent to the rule's condition (tenant scoping rides in the matchers)."""
    if rule.kind is RuleKind.PROMQL and rule.expr:
        return rule.expr
    series = _selector(rule)
    if rule.kind is RuleKind.ABSENT:
        return f"time() - max by (node) (timestamp({series})) > {_number(rule.for_duration.total_seconds())}"
    if rule.kind is RuleKind.INCREASE and rule.window is not None:
        series = f"increase({series}[{format_duration(rule.window)}])"
    elif rule.bit is not None:
        series = f"floor({series} / {2**rule.bit}) % 2"
    return f"{series} {rule.comparator.value} {_number(rule.threshold)}"


def _export_rule(rule: Rule) -> dict[str, Any]:
    labels = {**rule.labels, "severity": rule.severity}
    if rule.owner_tenant is not None:
        labels["owner_tenant"] = rule.owner_tenant
    entry: dict[str, Any] = {"alert": rule.name, "expr": expr_for(rule)}
    # Prometheus's `for` on an absence expression would delay it twice: the silence is in the expression.
    entry["for"] = "0s" if rule.kind is RuleKind.ABSENT else format_duration(rule.for_duration)
    if rule.keep_firing_for is not None:
        entry["keep_firing_for"] = format_duration(rule.keep_firing_for)
    return {**entry, "labels": labels, "annotations": rule.all_annotations()}


def export_rules(rules: Iterable[Rule]) -> dict[str, Any]:
    """A rule-file document: the rules in their groups (in the order first seen), with their intervals."""
    grouped: dict[str, list[Rule]] = {}
    for rule in rules:
        grouped.setdefault(rule.group, []).append(rule)
    groups = []
    for name, members in grouped.items():
        body: dict[str, Any] = {"name": name}
        interval = next((r.interval for r in members if r.interval is not None), None)
        if interval is not None:
            body["interval"] = format_duration(interval)
        groups.append(body | {"rules": [_export_rule(r) for r in members]})
    return {"groups": groups}


def promql_metric(expr: str) -> str:
    """The sample field a PromQL expression reads first (a promql rule's `metric`); ValueError when it
    does not parse, uses a construct the evaluator refuses, or selects a series this service lacks."""
    try:
        query = Query.parse(expr)
    except PromQLError as error:
        raise ValueError(f"expr: {error}") from None
    known = {METRIC_PREFIX + m for m in METRICS | {GPU_LOST_METRIC}}
    foreign = sorted(query.metric_names - known)
    if foreign or not query.metric_names:
        named = f"selects {foreign[0]}" if foreign else "selects no series"
        raise ValueError(f"expr: {named}: this service's series are {', '.join(sorted(known))}")
    return sorted(query.metric_names)[0].removeprefix(METRIC_PREFIX)


def _stream_shape(expr: str) -> tuple[RuleKind, re.Match[str]] | None:
    for kind, pattern in _FORMS:
        found = pattern.fullmatch(expr)
        if found is not None:
            return kind, found
    return None


def group_mode(group: Mapping[str, Any], asked: EvaluationMode | None) -> EvaluationMode:
    """A group's evaluation mode: the one asked for, else stream when every rule has a stream shape."""
    if asked is not None:
        return asked
    exprs = [str(e.get("expr", "")).strip() for e in group.get("rules") or () if not e.get("record")]
    if all(_stream_shape(e) is not None for e in exprs):
        return EvaluationMode.STREAM
    return EvaluationMode.PROMETHEUS


def _rule_from(entry: Mapping[str, Any], group: Mapping[str, Any], mode: EvaluationMode) -> Rule:
    if entry.get("record"):
        raise ValueError(
            f"recording rule {entry['record']!r} (record:) is not supported: only alerting rules are imported"
        )
    expr = str(entry["expr"]).strip()
    shape = _stream_shape(expr)
    try:
        if shape is not None:
            return _build(*shape, entry, group, mode=mode)
        if mode is EvaluationMode.STREAM:
            raise ValueError(
                f"expression {expr!r} is not one stream mode evaluates (see docs/alerting.md); "
                "import the group in prometheus mode (?mode=prometheus)"
            )
        return _build_promql(expr, entry, group)
    except ValidationError as error:
        raise ValueError(f"alert {entry.get('alert')!r}: {_first_problem(error)}") from None
    except ValueError as error:
        raise ValueError(f"alert {entry.get('alert')!r}: {error}") from None


def _first_problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    problem = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {problem}" if where else problem


def _common(entry: Mapping[str, Any], group: Mapping[str, Any]) -> dict[str, Any]:
    """What every imported rule takes from its entry and group: name, for, labels, annotations..."""
    labels, annotations = dict(entry.get("labels") or {}), dict(entry.get("annotations") or {})
    fields: dict[str, Any] = {
        "name": entry["alert"],
        "for_duration": parse_duration(str(entry.get("for", "0s"))),
        "severity": labels.pop("severity", Severity.WARNING.value),
        "owner_tenant": labels.pop("owner_tenant", None),
        "summary": annotations.pop("summary", ""),
        "runbook_url": annotations.pop("runbook_url", None),
        "labels": labels,
        "annotations": annotations,
        "group": group["name"],
    }
    interval = parse_duration(str(group.get("interval") or "0s"))
    if interval:  # Prometheus reads 0 as "the global evaluation interval"
        fields["interval"] = interval
    if "keep_firing_for" in entry:
        fields["keep_firing_for"] = parse_duration(str(entry["keep_firing_for"]))
    return fields


def _build_promql(expr: str, entry: Mapping[str, Any], group: Mapping[str, Any]) -> Rule:
    fields = _common(entry, group) | {
        "kind": RuleKind.PROMQL,
        "expr": expr,
        "metric": promql_metric(expr),
        "mode": EvaluationMode.PROMETHEUS,
    }
    return Rule.model_validate(fields)


def _build(
    kind: RuleKind,
    found: re.Match[str],
    entry: Mapping[str, Any],
    group: Mapping[str, Any],
    *,
    mode: EvaluationMode,
) -> Rule:
    fields = _common(entry, group) | {
        "kind": kind,
        "mode": mode,
        "metric": found.group("metric"),
        "matchers": parse_matchers(found.group("sel") or ""),
        "comparator": Comparator(found.group("cmp")),
        "threshold": float(found.group("thr")),
    }
    if kind is RuleKind.ABSENT:
        if not math.isfinite(fields["threshold"]):
            raise ValueError("the silence after `>` must be a finite number")
        silence = parse_duration(f"{int(fields['threshold'])}s")
        fields |= {"for_duration": silence, "threshold": 0.0, "comparator": Comparator.GT}
    if kind is RuleKind.INCREASE:
        fields["window"] = parse_duration(found.group("window"))
    if "div" in found.groupdict() and found.group("div"):
        fields["bit"] = int(found.group("div")).bit_length() - 1
    return Rule.model_validate(fields)


def rules_from_document(document: Any, *, mode: EvaluationMode | None = None) -> tuple[Rule, ...]:
    """Read rules back from a parsed rule file; ValueError lists every structural problem found.

    `mode` evaluates every group so; None picks per group (see group_mode)."""
    errors = validate_rule_file(document)
    if errors:
        raise ValueError("; ".join(errors))
    rules = tuple(
        _rule_from(entry, group, group_mode(group, mode))
        for group in document["groups"]
        for entry in group["rules"] or ()
    )
    names = Counter(rule.name for rule in rules)
    repeated = sorted(name for name, count in names.items() if count > 1)
    if repeated:
        raise ValueError(
            f"alert {repeated[0]!r} is defined more than once in the file: "
            "alert names are unique here (write one rule, or give each its own name)"
        )
    return rules


def unmatched_labels(rule: Rule) -> list[str]:
    """Warnings for matchers that need a label the sample series never carry: such a rule cannot fire."""
    return [
        f"alert {rule.name!r}: matcher {m} needs label {m.name!r}, which samples do not carry "
        f"(they carry {', '.join(sorted(SCOPE_LABELS))}, and {XID_LABEL} on gpucloud_xid_count): "
        "the rule matches no series yet"
        for m in rule.matchers
        if m.name not in SCOPE_LABELS and not m.matches({}) and not (m.name == XID_LABEL and rule.per_xid)
    ]


def condition_key(rule: Rule) -> tuple[object, ...]:
    """What two rules paging on the same condition share: owner, expression and `for`."""
    return (rule.owner_tenant, expr_for(rule), rule.for_duration)


def same_condition(rule: Rule, other: Rule) -> bool:
    """Whether two rules of different names page on the same condition (expression and `for`)."""
    return rule.name != other.name and condition_key(rule) == condition_key(other)
