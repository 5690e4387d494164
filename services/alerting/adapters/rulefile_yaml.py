"""Prometheus rule files as YAML text: the rules of a file, and the text of a rule-file document."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import yaml

from libs.common.yaml_safe import DEFAULT_LIMITS, load
from services.alerting.domain.promrules import rules_from_document
from services.alerting.domain.rules import EvaluationMode, Rule

__all__ = ["RULE_FILE_LIMITS", "parse_rule_file", "parse_rule_file_async", "to_yaml"]

RULE_FILE_LIMITS = DEFAULT_LIMITS


def to_yaml(document: Mapping[str, Any]) -> str:
    """YAML text of a rule-file document, keys in the order written."""
    return yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True)


def parse_rule_file(text: str, *, mode: EvaluationMode | None = None) -> tuple[Rule, ...]:
    """Read rules back from rule-file YAML; ValueError (YamlRefused for the YAML itself) names the problem.
    `mode` evaluates every group so (None: stream for groups of stream shapes, else prometheus)."""
    return rules_from_document(load(text, limits=RULE_FILE_LIMITS), mode=mode)


async def parse_rule_file_async(text: str, *, mode: EvaluationMode | None = None) -> tuple[Rule, ...]:
    """`parse_rule_file` in a worker thread: a large rule file never holds up the event loop."""
    return await asyncio.to_thread(parse_rule_file, text, mode=mode)
