"""A rule file as Prometheus users write it, imported over HTTP and paging a webhook receiver."""

from __future__ import annotations

from typing import Any

import yaml

from services.alerting.app import create_app
from tests.integration.alerting.helpers import (
    Feeder,
    Receiver,
    add_receiver,
    alerting_settings,
    alerts_in,
    receiving,
)
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually, running

RULE_FILE = """
groups:
  - name: gpu-memory
    interval: 15s
    rules:
      - alert: RfMemoryHigh
        expr: gpucloud_fb_used_pct{node="rf-node"} > 90
        for: 0s
        labels:
          severity: page
          team: gpu-infra
        annotations:
          summary: "{{ $labels.gpu }} on {{ $labels.node }} uses {{ $value | humanize }}% of its memory"
          description: "{{ humanizePercentage 0.5 }} of the fleet is {{ .Labels.model }}"
  - name: gpu-faults
    rules:
      - alert: RfFatalXid
        expr: increase(gpucloud_xid_count{xid=~"48|79"}[5m]) > 0
        labels:
          severity: critical
        annotations:
          summary: "XID {{ $labels.xid }} on {{ $labels.gpu }}"
"""
YAML = {**ADMIN_HEADERS, "content-type": "application/yaml"}


def _firing(receiver: Receiver) -> list[dict[str, Any]]:
    return alerts_in(receiver.accepted(), "firing")


async def test_prometheus_rule_file_pages_with_expanded_summary_and_every_label(isolation: Isolation) -> None:
    app = create_app(alerting_settings(isolation))
    feeder = Feeder(isolation, node="rf-node", mem_pct=50)
    async with receiving() as receiver, running(app) as client, feeder.running():
        await add_receiver(client, receiver)
        imported = await client.post("/v1/rules/import", content=RULE_FILE, headers=YAML)
        assert imported.status_code == 200, imported.text
        assert imported.json()["imported"] == ["RfMemoryHigh", "RfFatalXid"]
        assert "warnings" not in imported.json()  # xid on gpucloud_xid_count is a label its series carry
        await eventually(
            lambda: _loaded(app, "RfMemoryHigh"), timeout=10, what="rule loaded by the evaluator"
        )
        feeder.mem_pct = 95
        await eventually(lambda: _present(_firing(receiver)), timeout=10, what="firing webhook")

        alert = _firing(receiver)[0]
        assert alert["annotations"] == {
            "summary": "GPU-rf-node-0 on rf-node uses 95% of its memory",
            "description": "50% of the fleet is A100",
        }
        assert alert["labels"] == {
            "alertname": "RfMemoryHigh",
            "severity": "page",
            "team": "gpu-infra",
            "gpu": "GPU-rf-node-0",
            "node": "rf-node",
            "model": "A100",
        }

        # A fatal XID pages under its code, with its own series' labels; a benign one (13) does not.
        feeder.xids = {13: 1}
        sent = len(feeder.sent)
        await eventually(lambda: _at_least(len(feeder.sent), sent + 4), timeout=10, what="XID 13 sent")
        feeder.xids = {13: 1, 79: 1}
        fatal = await eventually(
            lambda: _named(_firing(receiver), "RfFatalXid"), timeout=10, what="the fatal XID paged"
        )
        assert fatal["labels"]["xid"] == "79"
        assert fatal["annotations"] == {"summary": "XID 79 on GPU-rf-node-0"}
        assert {
            a["labels"]["xid"] for a in _firing(receiver) if a["labels"]["alertname"] == "RfFatalXid"
        } == {"79"}

        exported = yaml.safe_load((await client.get("/v1/rules/export", headers=ADMIN_HEADERS)).text)
        groups = {g["name"]: g for g in exported["groups"]}
        assert groups["gpu-memory"]["interval"] == "15s"
        assert [r["alert"] for r in groups["gpu-faults"]["rules"]] == ["RfFatalXid"]
        assert 'xid=~"48|79"' in groups["gpu-faults"]["rules"][0]["expr"]


async def test_a_rule_name_already_taken_is_refused_unless_replacing(isolation: Isolation) -> None:
    app = create_app(alerting_settings(isolation))
    async with running(app) as client:
        first = await client.post("/v1/rules/import", content=RULE_FILE, headers=YAML)
        assert first.status_code == 200, first.text
        again = await client.post("/v1/rules/import", content=RULE_FILE, headers=YAML)
        assert again.status_code == 409
        assert "'RfMemoryHigh' exists" in again.text
        replaced = await client.post("/v1/rules/import?replace=true", content=RULE_FILE, headers=YAML)
        assert replaced.json()["replaced"] == ["RfMemoryHigh", "RfFatalXid"]

        shipped = RULE_FILE.replace("RfMemoryHigh", "GpuMemoryHigh")
        refused = await client.post("/v1/rules/import", content=shipped, headers=YAML)
        assert refused.status_code == 409
        assert "shipped rule named 'GpuMemoryHigh'" in refused.text

        twin = RULE_FILE.replace("RfMemoryHigh", "RfMemoryTwin").replace("RfFatalXid", "RfXidTwin")
        warned = await client.post("/v1/rules/import", content=twin, headers=YAML)
        assert (
            "alert 'RfMemoryTwin' has the same condition as 'RfMemoryHigh': both will page"
            in warned.json()["warnings"]
        )

        broken = RULE_FILE.replace("{{ $value | humanize }}", "{{ $value | humanise }}")
        refused = await client.post("/v1/rules/import?replace=true", content=broken, headers=YAML)
        assert refused.status_code == 422
        assert "alert 'RfMemoryHigh': annotation 'summary'" in refused.text
        assert 'function \\"humanise\\" not defined' in refused.text


async def _present(items: list[dict[str, object]]) -> bool:
    return bool(items)


async def _at_least(value: int, least: int) -> bool:
    return value >= least


async def _named(items: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((a for a in items if a["labels"]["alertname"] == name), None)


async def _loaded(app: object, name: str) -> bool:
    return name in app.state.evaluator.rule_names  # type: ignore[attr-defined]


PROMQL_FILE = """
groups:
  - name: node-memory
    interval: 1s
    rules:
      - alert: RfNodeMemory
        expr: >-
          max by (node) (gpucloud_fb_used_pct{node="rf-prom"}) > 90
          and on (node) count by (node) (gpucloud_gpu_temp_c) >= 1
        for: 2s
        labels:
          severity: page
        annotations:
          summary: "{{ $labels.node }} peaks at {{ $value | humanize }}%"
"""


async def test_a_promql_rule_pages_in_prometheus_mode_and_resolves(isolation: Isolation) -> None:
    app = create_app(alerting_settings(isolation))
    feeder = Feeder(isolation, node="rf-prom", mem_pct=50)
    async with receiving() as receiver, running(app) as client, feeder.running():
        await add_receiver(client, receiver)
        imported = await client.post("/v1/rules/import", content=PROMQL_FILE, headers=YAML)
        assert imported.status_code == 200, imported.text
        rule = (await client.get("/v1/rules/RfNodeMemory", headers=ADMIN_HEADERS)).json()
        assert (rule["kind"], rule["mode"]) == ("promql", "prometheus")
        await eventually(lambda: _loaded(app, "RfNodeMemory"), timeout=10, what="rule loaded")
        feeder.mem_pct = 95
        alert = await eventually(
            lambda: _named(_firing(receiver), "RfNodeMemory"), timeout=15, what="the promql rule paged"
        )
        assert alert["labels"] == {"alertname": "RfNodeMemory", "node": "rf-prom", "severity": "page"}
        assert alert["annotations"] == {"summary": "rf-prom peaks at 95%"}
        feeder.mem_pct = 50
        resolved = await eventually(
            lambda: _named(alerts_in(receiver.accepted(), "resolved"), "RfNodeMemory"),
            timeout=15,
            what="the promql alert resolved",
        )
        assert resolved["labels"] == alert["labels"]

        exported = yaml.safe_load((await client.get("/v1/rules/export", headers=ADMIN_HEADERS)).text)
        groups = {g["name"]: g for g in exported["groups"]}
        assert groups["node-memory"]["rules"][0]["expr"].startswith("max by (node)")


async def test_promql_stream_mode_cannot_hold_and_refused_constructs_are_422s(isolation: Isolation) -> None:
    app = create_app(alerting_settings(isolation))
    async with running(app) as client:
        stream = await client.post("/v1/rules/import?mode=stream", content=PROMQL_FILE, headers=YAML)
        assert stream.status_code == 422
        assert "prometheus mode" in stream.text
        subquery = "max_over_time(max by (node) (gpucloud_fb_used_pct)[5m:1m]) > 90"
        expr = yaml.safe_load(PROMQL_FILE)["groups"][0]["rules"][0]["expr"]
        unsupported = PROMQL_FILE.replace(
            'max by (node) (gpucloud_fb_used_pct{node="rf-prom"}) > 90', subquery
        ).replace("and on (node) count by (node) (gpucloud_gpu_temp_c) >= 1", "")
        assert expr not in unsupported
        refused = await client.post("/v1/rules/import", content=unsupported, headers=YAML)
        assert refused.status_code == 422
        assert "subquer" in refused.text
        foreign = PROMQL_FILE.replace("gpucloud_gpu_temp_c", "node_cpu_seconds_total")
        refused = await client.post("/v1/rules/import", content=foreign, headers=YAML)
        assert refused.status_code == 422
        assert "node_cpu_seconds_total" in refused.text
        listed = (await client.get("/v1/rules", headers=ADMIN_HEADERS)).json()
        assert "RfNodeMemory" not in {r["name"] for r in listed}
