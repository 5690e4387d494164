"""Structural checks of a Prometheus rule file, mirroring Prometheus's rulefmt (PromQL is not parsed)."""

from __future__ import annotations

import re
from typing import Any

from services.alerting.domain.durations import DurationOutOfRange, parse_duration

__all__ = ["validate_rule_file"]

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_GROUP_KEYS = {"name", "interval", "query_offset", "limit", "labels", "rules"}
_RULE_KEYS = {"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations"}


def validate_rule_file(document: Any) -> list[str]:
    """Every problem Prometheus would report when loading this document; empty when it would load."""
    if not isinstance(document, dict) or set(document) - {"groups"}:
        return ["a rule file is a mapping with only a `groups` key"]
    groups = document.get("groups") or []
    if not isinstance(groups, list):
        return ["`groups` must be a list"]
    errors: list[str] = []
    seen: set[str] = set()
    for index, group in enumerate(groups):
        errors += _check_group(index, group, seen)
    return errors


def _check_group(index: int, group: Any, seen: set[str]) -> list[str]:
    if not isinstance(group, dict):
        return [f"group {index}: must be a mapping"]
    name = group.get("name")
    where = f"group {name!r}"
    errors = [f"{where}: unknown field {k!r}" for k in sorted(set(group) - _GROUP_KEYS)]
    if not isinstance(name, str) or not name:
        errors.append(f"group {index}: name must not be empty")
    elif name in seen:
        errors.append(f"{where}: repeated in the same file")
    seen.add(str(name))
    errors += _duration(where, "interval", group)
    rules = group.get("rules") or []
    if not isinstance(rules, list):
        return [*errors, f"{where}: rules must be a list"]
    for position, rule in enumerate(rules):
        errors += [f"{where} rule {position}: {e}" for e in _check_rule(rule)]
    return errors


def _check_rule(rule: Any) -> list[str]:
    if not isinstance(rule, dict):
        return ["must be a mapping"]
    errors = [f"unknown field {k!r}" for k in sorted(set(rule) - _RULE_KEYS)]
    record, alert = rule.get("record"), rule.get("alert")
    if bool(record) == bool(alert):
        errors.append("exactly one of 'record' and 'alert' must be set")
    if alert is not None and (not isinstance(alert, str) or not alert):
        errors.append("alert name must be a non-empty string")
    if record is not None and (not isinstance(record, str) or not _METRIC_NAME.fullmatch(record)):
        errors.append(f"invalid recording rule name {record!r}")
    if record and set(rule) & {"for", "keep_firing_for", "annotations"}:
        errors.append("a recording rule takes no 'for', 'keep_firing_for' or 'annotations'")
    expr = rule.get("expr")
    if not isinstance(expr, str) or not expr.strip():
        errors.append("field 'expr' must be set in rule")
    elif expr.count("(") != expr.count(")"):
        errors.append("expr has unbalanced parentheses")
    errors += _duration("", "for", rule) + _duration("", "keep_firing_for", rule)
    return (
        errors
        + _string_map("labels", rule.get("labels"))
        + _string_map("annotations", rule.get("annotations"))
    )


def _duration(where: str, key: str, holder: dict[str, Any]) -> list[str]:
    if key not in holder:
        return []
    prefix = f"{where}{': ' if where else ''}{key}"
    try:
        parse_duration(str(holder[key]))
    except DurationOutOfRange as error:
        return [f"{prefix}: {error}"]
    except ValueError:
        return [f"{prefix} is not a valid duration: {holder[key]!r}"]
    return []


def _string_map(kind: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, dict):
        return [f"{kind} must be a mapping"]
    errors = [
        f"invalid {kind} name {k!r}" for k in value if not (isinstance(k, str) and _LABEL_NAME.fullmatch(k))
    ]
    errors += [f"{kind} {k!r} must be a string" for k, v in value.items() if not isinstance(v, str)]
    if kind == "labels" and "__name__" in value:
        errors.append("labels may not set __name__")
    return errors
