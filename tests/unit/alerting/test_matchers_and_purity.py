from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.alerting.durations import format_duration, parse_duration
from services.alerting.matchers import Matcher, MatchOp, format_matchers, parse_matchers
from services.alerting.rules import Rule

CORE = Path(__file__).parents[3] / "services" / "alerting"
# The IO adapters (composition root, loops, stores, API); everything else must stay pure.
NOT_CORE = {
    "app.py",
    "__main__.py",
    "settings.py",
    "api_alerts.py",
    "api_delivery.py",
    "api_rules.py",
    "delivery.py",
    "deliverystore.py",
    "evaluator.py",
    "handlers.py",
    "schemas.py",
    "statestore.py",
    "store.py",
    "views.py",
}
FORBIDDEN_IMPORTS = {
    "asyncio",
    "asyncpg",
    "aiokafka",
    "httpx",
    "redis",
    "fastapi",
    "socket",
    "os",
    "time",
    "libs",
}


@pytest.mark.parametrize(
    ("op", "value", "labels", "expected"),
    [
        (MatchOp.EQ, "a", {"node": "a"}, True),
        (MatchOp.NE, "a", {"node": "a"}, False),
        (MatchOp.RE, "a|b", {"node": "b"}, True),
        (MatchOp.RE, "a", {"node": "ab"}, False),
        (MatchOp.NRE, "gpu-.*", {"node": "cpu-1"}, True),
        (MatchOp.EQ, "", {}, True),
    ],
)
def test_matchers_are_anchored_and_treat_missing_labels_as_empty(
    op: MatchOp, value: str, labels: dict[str, str], expected: bool
) -> None:
    assert Matcher(name="node", op=op, value=value).matches(labels) is expected


def test_matchers_round_trip_through_their_text_form() -> None:
    matchers = (Matcher(name="node", op=MatchOp.NE, value='x"y\\z,'), Matcher(name="pool", value="p"))
    assert parse_matchers(format_matchers(matchers)) == matchers


def test_invalid_regex_or_label_name_is_refused_when_saved() -> None:
    with pytest.raises(ValidationError):
        Matcher(name="node", op=MatchOp.RE, value="(")
    with pytest.raises(ValidationError):
        Matcher(name="9node", value="a")


def test_rules_refuse_unknown_metrics_and_labels_outside_the_scope() -> None:
    with pytest.raises(ValidationError, match="unknown metric"):
        Rule(name="X", metric="cpu_pct")
    with pytest.raises(ValidationError, match="scoped only by"):
        Rule(name="X", metric="gpu_temp_c", matchers=(Matcher(name="zone", value="z"),))
    with pytest.raises(ValidationError, match="needs a window"):
        Rule(name="X", kind="increase", metric="xid_count")


@pytest.mark.parametrize(
    ("text", "seconds"), [("5m", 300), ("1h30m", 5400), ("0s", 0), ("0", 0), ("1d", 86400)]
)
def test_prometheus_durations_parse(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5 minutes", "m5", "5m1h", "1.5h"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_durations_format_in_their_shortest_spelling() -> None:
    assert format_duration(timedelta(minutes=90)) == "1h30m"
    assert format_duration(timedelta(milliseconds=1500)) == "1s500ms"


def test_domain_core_does_no_io_and_reads_no_clock() -> None:
    offenders = []
    for path in sorted(CORE.glob("*.py")):
        if path.name in NOT_CORE:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN_IMPORTS]
            if isinstance(node, ast.Attribute) and node.attr in {"now", "utcnow", "today", "time_ns"}:
                offenders.append(f"{path.name}: .{node.attr}")
    assert offenders == []
