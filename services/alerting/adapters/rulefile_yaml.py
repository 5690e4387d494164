"""Prometheus rule files as YAML text: the rules of a file, and the text of a rule-file document."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from services.alerting.domain.promrules import rules_from_document
from services.alerting.domain.rules import Rule

__all__ = ["parse_rule_file", "to_yaml"]


def to_yaml(document: Mapping[str, Any]) -> str:
    """YAML text of a rule-file document, keys in the order written."""
    return yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True)


def parse_rule_file(text: str) -> tuple[Rule, ...]:
    """Read rules back from rule-file YAML; ValueError lists every structural problem found."""
    return rules_from_document(yaml.safe_load(text))
