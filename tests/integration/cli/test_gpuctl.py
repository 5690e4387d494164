"""Issue 20's acceptance: the installed gpuctl binary against the real suite, one test per command group."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq

from libs.common.settings import DEV_ADMIN_KEY
from tests.integration.cli.conftest import NETWORK, CliSuite, Tenant, until
from tests.integration.flows.suite import fleet_gpus

ADMIN = ("--context", "admin")
RULES = """\
groups:
  - name: acme
    rules:
      - alert: AcmeHotGpu
        expr: gpucloud_gpu_temp_c > 95
        for: 1m
        labels: {severity: warning}
        annotations: {summary: A GPU of acme runs hot}
"""
JOB = """\
image: {name: pytorch, version: '2.3'}
resources: {kind: gpu, model: A100-80GB, count: 1}
network: {vpc_id: vpc-main1, subnet_id: subnet-a001, security_group_id: sg-default}
urgency: 0.9
tags: {project: vision, team: cv}
"""


def _notebook(cli: CliSuite) -> dict[str, Any]:
    """An instance made with `create` by flags: one L4, billed to project notebooks, team ml."""
    created: dict[str, Any] = cli.json(
        "create",
        "--image",
        "pytorch:2.3",
        "--gpu",
        "L4:1",
        *NETWORK,
        "--tag",
        "project=notebooks",
        "--tag",
        "team=ml",
    )
    return created


def test_login_stores_a_private_context_and_whoami_reads_it_back(cli_suite: CliSuite, acme: Tenant) -> None:
    config = cli_suite.config_home / "gpuctl" / "config.yaml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert acme.key in config.read_text()
    who = cli_suite.json("whoami")
    assert (who["context"], who["role"], who["tenant"]) == ("acme", "tenant", "acme")
    assert who["services"]["billing"] == f"http://127.0.0.1:{cli_suite.base_port + 4}"
    assert cli_suite.json("whoami", *ADMIN)["role"] == "admin"
    current = {c["name"]: c["current"] for c in cli_suite.json("contexts")}
    assert current == {"acme": True, "admin": False}


def test_a_key_the_services_refuse_is_not_stored_and_exits_3(cli_suite: CliSuite) -> None:
    port = str(cli_suite.base_port)
    refused = cli_suite.fails(
        "login", "--base-port", port, "--key", "gck_knope_wrong", "--context", "bad", code=3
    )
    assert "unknown or revoked API key (HTTP 401 unauthorized)" in refused
    assert "bad" not in {c["name"] for c in cli_suite.json("contexts")}


def test_capacity_shows_the_fleet_in_compute_units_by_pool_model_and_zone(
    cli_suite: CliSuite, acme: Tenant
) -> None:
    capacity = cli_suite.json("capacity")
    assert capacity["total"]["total_gpus"] == sum(len(g) for g in fleet_gpus().values())
    assert set(capacity["by_pool"]) == {"training", "inference"}
    assert {"A100-80GB", "H100-80GB-SXM", "L4"} <= set(capacity["by_model"])
    assert set(capacity["by_zone"]) == {"z1"}
    bars = cli_suite.ok("capacity", "--by", "pool")
    assert "UNITS ALLOCATED" in bars
    assert "training" in bars
    assert "░" in bars
    assert len(cli_suite.json("gpus", "--model", "L4")) == 4


def test_create_by_flags_fills_the_three_steps_and_describe_shows_the_instance(
    cli_suite: CliSuite, acme: Tenant
) -> None:
    created = _notebook(cli_suite)
    assert (created["kind"], created["tenant_id"]) == ("instance", "acme")
    assert created["spec"]["resources"] == {"kind": "gpu", "model": "L4", "count": 1, "min_memory_gb": None}
    shown = cli_suite.json("describe", created["workload_id"])
    assert shown["spec"]["network"]["vpc_id"] == "vpc-main1"
    assert shown["tags"] == {"project": "notebooks", "team": "ml"}
    refused = cli_suite.fails("create", "--image", "pytorch:9", "--gpu", "L4:1", *NETWORK, code=7)
    assert "image.version: pytorch has no version '9' (HTTP 422 validation_error)" in refused


def test_submit_from_a_yaml_spec_queues_a_job_that_ls_lists(
    cli_suite: CliSuite, acme: Tenant, tmp_path: Path
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(JOB)
    job = cli_suite.json("submit", "-f", str(spec), "--time-limit", "2h")
    assert (job["kind"], job["urgency"], job["spec"]["time_limit_s"]) == ("job", 0.9, 7200)
    assert job["tags"] == {"project": "vision", "team": "cv"}
    assert job["workload_id"] in cli_suite.ok("ls", "--limit", "1000")


def test_priority_shows_every_term_of_the_formula(cli_suite: CliSuite, acme: Tenant) -> None:
    submitted = cli_suite.json(
        "submit", "--image", "pytorch:2.3", "--gpu", "L4:1", *NETWORK, "--urgency", "0.5"
    )
    terms = cli_suite.json("priority", submitted["workload_id"])
    assert terms["urgency_term"] == 0.6 * 0.5
    assert abs(terms["fair_share_term"] - 0.4 * (1 - terms["fair_share"])) < 1e-9
    assert abs(terms["raw"] - terms["urgency_term"] - terms["fair_share_term"]) < 1e-9
    table = cli_suite.ok("priority", submitted["workload_id"])
    assert "0.6 * urgency" in table
    assert "0.4 * (1 - fair_share)" in table


def test_cancel_ends_a_workload_and_says_why_it_cannot_twice(cli_suite: CliSuite, acme: Tenant) -> None:
    wid = cli_suite.json("submit", "--image", "pytorch:2.3", "--units", "1", *NETWORK)["workload_id"]
    assert cli_suite.json("cancel", wid)[0]["state"] == "cancelled"
    assert "already ended" in cli_suite.fails("cancel", wid, code=5)
    assert "no workload 'wl-nope'" in cli_suite.fails("cancel", "wl-nope", code=4)


def test_silence_add_then_expire_with_amtool_matchers(cli_suite: CliSuite, acme: Tenant) -> None:
    added = cli_suite.ok(
        "silence", "add", "alertname=GpuMemoryHigh", 'node=~"fa-l4.*"', "-c", "drill", "-d", "30m"
    )
    silence_id = added.strip()
    active = {s["id"]: s for s in cli_suite.json("silence", "ls")}
    assert {(m["name"], m["op"], m["value"]) for m in active[silence_id]["matchers"]} == {
        ("alertname", "=", "GpuMemoryHigh"),
        ("node", "=~", "fa-l4.*"),
        ("tenant", "=", "acme"),
    }
    cli_suite.ok("silence", "expire", silence_id)
    assert silence_id not in {s["id"] for s in cli_suite.json("silence", "ls")}
    expired = {s["id"]: s for s in cli_suite.json("silence", "ls", "--expired")}
    assert expired[silence_id]["active"] is False
    assert "not a matcher" in cli_suite.fails("silence", "add", "not a matcher", "-c", "x", code=2)


def test_rules_import_and_alerts_as_a_tenant(cli_suite: CliSuite, acme: Tenant, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    assert cli_suite.json("rules", "import", str(rules)) == {"imported": ["AcmeHotGpu"]}
    assert {r["name"]: r["owner_tenant"] for r in cli_suite.json("rules", "ls")}["AcmeHotGpu"] == "acme"
    assert isinstance(cli_suite.json("alerts"), list)


def test_advice_recommends_a_model_the_fleet_has(cli_suite: CliSuite, acme: Tenant) -> None:
    advice = cli_suite.json("recommend", "--framework", "pytorch", "--params-b", "7")
    assert advice["model"] in {"A100-80GB", "H100-80GB-SXM", "L4"}
    assert advice["reasons"]
    assert cli_suite.json("predict", "--framework", "pytorch")["history_too_thin"] is True


def test_admin_manages_tenants_keys_and_quotas(cli_suite: CliSuite, acme: Tenant) -> None:
    assert "acme" in {t["tenant_id"] for t in cli_suite.json("admin", "tenants", "ls", *ADMIN)}
    quota = cli_suite.json("admin", "quotas", "set", "acme", "--gpus", "8", "--workloads", "20", *ADMIN)
    assert quota["limits"] == {"gpus": 8, "units": None, "workloads": 20}
    assert cli_suite.json("admin", "quotas", "get", "acme", *ADMIN)["limits"]["gpus"] == 8
    issued = cli_suite.json("admin", "keys", "issue", "acme", *ADMIN)
    cli_suite.ok("admin", "keys", "revoke", issued["key_id"], *ADMIN)
    # Without --context admin, the current context is acme's tenant key.
    assert "this operation needs an admin key" in cli_suite.fails("admin", "tenants", "ls", code=3)


def test_costs_by_team_and_a_parquet_export_that_reads_back(
    cli_suite: CliSuite, acme: Tenant, tmp_path: Path
) -> None:
    if not any(w["tags"].get("project") == "notebooks" for w in cli_suite.json("ls")):
        _notebook(cli_suite)

    def charged() -> dict[str, Any] | None:
        costs: dict[str, Any] = cli_suite.json("costs", "--by", "tag:team")
        return costs if any(g["key"] == "ml" and g["amount_micro"] > 0 for g in costs["groups"]) else None

    costs = until(charged, timeout=60, what="acme's notebooks charged to team ml", interval=1)
    assert costs["total_micro"] == sum(g["amount_micro"] for g in costs["groups"])
    target = tmp_path / "notebooks.parquet"
    cli_suite.ok("export", "notebooks", "--format", "parquet", "-o", str(target))
    rows = pq.read_table(target).to_pylist()  # pyarrow is untyped
    assert {r["tenant_id"] for r in rows} == {"acme"}
    debit = sum(int(r["debit_micro"] or 0) for r in rows)
    assert debit > 0
    assert debit == sum(int(r["credit_micro"] or 0) for r in rows)


def test_top_once_shows_only_the_tenants_gpus(cli_suite: CliSuite, acme: Tenant) -> None:
    def sampled() -> list[dict[str, Any]] | None:
        rows: list[dict[str, Any]] = cli_suite.json("top", "--once")
        return rows or None

    rows = until(sampled, timeout=60, what="samples of acme's GPUs", interval=1)
    assert {r["tenant_id"] for r in rows} == {"acme"}
    assert "PCIE MB/s" in cli_suite.ok("top", "--once")


def test_incidents_list_and_watch_a_recovery_until_it_closes(cli_suite: CliSuite, acme: Tenant) -> None:
    gpu = fleet_gpus()["fa-h100"][0]  # acme's work is on L4 and A100 nodes: nothing has to move
    injected = httpx.post(
        cli_suite.stack.url("telemetry") + "/v1/admin/sim/faults",
        json={"gpu_uuid": gpu, "fault": "xid", "xid": 79},
        headers={"X-API-Key": DEV_ADMIN_KEY},
    )
    assert injected.status_code == 202, injected.text

    def opened() -> list[dict[str, Any]] | None:
        found: list[dict[str, Any]] = cli_suite.json("incidents", "--gpu", gpu, *ADMIN)
        return found or None

    incident = until(opened, timeout=60, what=f"an incident on {gpu}", interval=1)[0]
    watch = ("incidents", "watch", incident["incident_id"], "--timeout", "150", *ADMIN)
    watched = cli_suite.json(*watch, timeout=180)
    assert watched["state"] == "resolved", watched
    assert watched["closed_at"] is not None
    assert "xid_79 (fatal" in cli_suite.ok("incidents", "describe", incident["incident_id"], *ADMIN)


def test_an_unreachable_installation_exits_6_and_is_not_stored(cli_suite: CliSuite) -> None:
    refused = cli_suite.fails("login", "--base-port", "1", "--key", "k", "--context", "nowhere", code=6)
    assert "cannot reach scheduler at http://127.0.0.1:2" in refused
    assert "nowhere" not in {c["name"] for c in cli_suite.json("contexts")}
