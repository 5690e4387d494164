from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from services.alerting.domain.alerts import Alert
from services.alerting.domain.grouping import Notification
from services.alerting.domain.payloads import alertmanager_webhook, slack_message
from services.alerting.domain.templates import (
    TemplateContext,
    TemplateError,
    compile_template,
    expand,
    go_float,
    humanize,
    humanize1024,
    humanize_duration,
    humanize_percentage,
)

CONTEXT = TemplateContext(
    labels={"gpu": "GPU-7", "node": "n1"}, value=91.25, external_labels={"cluster": "eu-1"}
)


# Expected strings are those of Prometheus's template tests (template/template_test.go).
@pytest.mark.parametrize(
    ("function", "values", "expected"),
    [
        (humanize, [0.0, 1.0, 1234567.0, 0.12, -1500.0], ["0", "1", "1.235M", "120m", "-1.5k"]),
        (humanize1024, [0.0, 1.0, 1048576.0, 0.12], ["0", "1", "1Mi", "0.12"]),
        (
            humanize_duration,
            [0, 1, 60, 3600, 86400, 86400 + 3600, -(86400 * 2 + 3600 * 3 + 60 * 4 + 5), 899.99],
            ["0s", "1s", "1m 0s", "1h 0m 0s", "1d 0h 0m 0s", "1d 1h 0m 0s", "-2d 3h 4m 5s", "14m 59s"],
        ),
        (
            humanize_duration,
            [0.1, 0.0001, 0.12345, 60.1, 60.5, 1.2345, 12.345],
            ["100ms", "100us", "123.5ms", "1m 0s", "1m 0s", "1.234s", "12.35s"],
        ),
        (humanize_percentage, [0.0, 0.1234567, 1.0], ["0%", "12.35%", "100%"]),
        (humanize, [float("inf"), float("nan")], ["+Inf", "NaN"]),
    ],
)
def test_humanize_functions_print_as_prometheus_does(
    function: object, values: list[float], expected: list[str]
) -> None:
    assert [function(v) for v in values] == expected  # type: ignore[operator]


def test_humanize_reads_a_number_given_as_text_and_refuses_other_text() -> None:
    assert humanize("1234567") == "1.235M"
    assert expand('{{ "x" | humanize }}', CONTEXT).startswith("<error expanding template: strconv.ParseFloat")


def test_value_prints_as_go_prints_a_float() -> None:
    assert [go_float(v) for v in (100.0, 91.25, 1e6, 1234567.0, 0.00001, -3.0)] == [
        "100",
        "91.25",
        "1e+06",
        "1.234567e+06",
        "1e-05",
        "-3",
    ]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("GPU {{ $labels.gpu }} on {{ .Labels.node }} is at {{ $value }}", "GPU GPU-7 on n1 is at 91.25"),
        ("{{ $value | humanize }}% in {{ $externalLabels.cluster }}", "91.25% in eu-1"),
        ('{{ printf "%.1f" $value }} / {{ index $labels "gpu" }}', "91.2 / GPU-7"),
        ("{{ $labels.missing }}|{{ humanizePercentage 0.5 }}", "|50%"),
        ("a  {{- /* note */ -}}  b {{- $labels.node }}", "abn1"),
        ("no templates at all", "no templates at all"),
    ],
)
def test_templates_expand_labels_value_and_external_labels(template: str, expected: str) -> None:
    assert expand(template, CONTEXT) == expected


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{{ $label.gpu }}", 'undefined variable "$label"'),
        ("{{ humanise $value }}", 'function "humanise" not defined'),
        ("{{ .Lables.gpu }}", "can't evaluate field Lables"),
        ("{{ if gt $value 90.0 }}hot{{ end }}", "{{if}} is not supported"),
        ("{{ $labels.gpu ", "unclosed action"),
        ("{{ $value | $labels }}", "must be a function"),
        ("{{ humanize }}", "wrong number of args for humanize: want 1 got 0"),
        ("{{ $value | humanize 2 }}", "wrong number of args for humanize: want 1 got 2"),
    ],
)
def test_broken_templates_are_refused_when_compiled(template: str, problem: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(problem)):
        compile_template(template)


def _notification() -> Notification:
    alert = Alert(
        fingerprint="f",
        labels={"alertname": "GpuHot", "gpu": "GPU-7", "team": "infra", "severity": "page"},
        annotations={"summary": "{{ $labels.gpu }} at {{ $value | humanize }}C", "runbook_url": "https://r"},
        starts_at=datetime(2026, 1, 1, tzinfo=UTC),
        value=91.25,
    )
    return Notification(
        id="n",
        receiver="hook",
        group_key="{}:{}",
        group_labels={"alertname": "GpuHot"},
        alerts=(alert,),
        created_at=alert.starts_at,
    )


def test_pages_carry_expanded_annotations_and_every_label() -> None:
    body = alertmanager_webhook(_notification(), external_url="http://am")
    assert body["alerts"][0]["annotations"]["summary"] == "GPU-7 at 91.25C"
    assert body["commonAnnotations"]["summary"] == "GPU-7 at 91.25C"
    assert body["alerts"][0]["labels"]["team"] == "infra"
    assert "GPU-7 at 91.25C" in slack_message(_notification())["blocks"][1]["text"]["text"]


def test_a_failure_while_expanding_becomes_text_never_an_exception() -> None:
    infinite = TemplateContext(labels={}, value=float("inf"))
    assert expand('{{ printf "%d" $value }}', infinite).startswith("<error expanding template:")
    assert expand('{{ printf "%.1f %s" $value "x" }}', infinite) == "+Inf x"
