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
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from services.alerting.domain.durations import format_duration, parse_duration
from services.alerting.domain.matchers import format_matchers, parse_matchers
from services.alerting.domain.rulefile import validate_rule_file
from services.alerting.domain.rules import Comparator, Rule, RuleKind, Severity

__all__ = ["METRIC_PREFIX", "export_rules", "expr_for", "rules_from_document", "validate_rule_file"]

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
    series = _selector(rule)
    if rule.kind is RuleKind.ABSENT:
        return f"time() - max by (node) (timestamp({series})) > {_number(rule.for_duration.total_seconds())}"
    if rule.kind is RuleKind.INCREASE and rule.window is not None:
        series = f"increase({series}[{format_duration(rule.window)}])"
    elif rule.bit is not None:
        series = f"floor({series} / {2**rule.bit}) % 2"
    return f"{series} {rule.comparator.value} {_number(rule.threshold)}"


def _export_rule(rule: Rule) -> dict[str, Any]:
    labels = {"severity": rule.severity.value}
    if rule.owner_tenant is not None:
        labels["owner_tenant"] = rule.owner_tenant
    annotations = {"summary": rule.summary}
    if rule.runbook_url:
        annotations["runbook_url"] = rule.runbook_url
    entry: dict[str, Any] = {"alert": rule.name, "expr": expr_for(rule)}
    # Prometheus's `for` on an absence expression would delay it twice: the silence is in the expression.
    entry["for"] = "0s" if rule.kind is RuleKind.ABSENT else format_duration(rule.for_duration)
    if rule.keep_firing_for is not None:
        entry["keep_firing_for"] = format_duration(rule.keep_firing_for)
    return {**entry, "labels": labels, "annotations": annotations}


def export_rules(
    rules: Iterable[Rule], *, group: str = "gpucloud", interval: str | None = None
) -> dict[str, Any]:
    """A rule-file document with one group holding the rules."""
    body: dict[str, Any] = {"name": group}
    if interval is not None:
        body["interval"] = interval
    body["rules"] = [_export_rule(r) for r in rules]
    return {"groups": [body]}


def _rule_from(entry: Mapping[str, Any]) -> Rule:
    expr = str(entry["expr"]).strip()
    for kind, pattern in _FORMS:
        found = pattern.fullmatch(expr)
        if found is not None:
            try:
                return _build(kind, found, entry)
            except ValidationError as error:
                raise ValueError(f"alert {entry.get('alert')!r}: {_first_problem(error)}") from None
    raise ValueError(f"alert {entry.get('alert')!r}: expression is not one this service writes: {expr!r}")


def _first_problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    problem = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {problem}" if where else problem


def _build(kind: RuleKind, found: re.Match[str], entry: Mapping[str, Any]) -> Rule:
    labels, annotations = entry.get("labels") or {}, entry.get("annotations") or {}
    fields: dict[str, Any] = {
        "name": entry["alert"],
        "kind": kind,
        "metric": found.group("metric"),
        "matchers": parse_matchers(found.group("sel") or ""),
        "comparator": Comparator(found.group("cmp")),
        "threshold": float(found.group("thr")),
        "for_duration": parse_duration(str(entry.get("for", "0s"))),
        "severity": Severity(labels.get("severity", Severity.WARNING.value)),
        "owner_tenant": labels.get("owner_tenant"),
        "summary": annotations.get("summary", ""),
        "runbook_url": annotations.get("runbook_url"),
    }
    if "keep_firing_for" in entry:
        fields["keep_firing_for"] = parse_duration(str(entry["keep_firing_for"]))
    if kind is RuleKind.ABSENT:
        if not math.isfinite(fields["threshold"]):
            raise ValueError(f"alert {entry['alert']!r}: the silence after `>` must be a finite number")
        silence = parse_duration(f"{int(fields['threshold'])}s")
        fields |= {"for_duration": silence, "threshold": 0.0, "comparator": Comparator.GT}
    if kind is RuleKind.INCREASE:
        fields["window"] = parse_duration(found.group("window"))
    if "div" in found.groupdict() and found.group("div"):
        fields["bit"] = int(found.group("div")).bit_length() - 1
    return Rule.model_validate(fields)


def rules_from_document(document: Any) -> tuple[Rule, ...]:
    """Read rules back from a parsed rule file; ValueError lists every structural problem found."""
    errors = validate_rule_file(document)
    if errors:
        raise ValueError("; ".join(errors))
    return tuple(_rule_from(entry) for group in document["groups"] for entry in group["rules"])
