"""What each command sends, and what it does with the answer, against the fake services."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.unit.gpuctl import samples
from tests.unit.gpuctl.conftest import Cli, error

DRAFT = "/v1/workloads/drafts"
STEPS = ("--image", "pytorch:2.3", "--gpu", "A100-80GB:2", "--vpc", "vpc-main1", "--subnet", "subnet-a001")
NETWORK = {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"}


def _drafts(cli: Cli) -> None:
    cli.api.on("POST", "scheduler", DRAFT, httpx.Response(201, json={"draft_id": "dr-1"}))
    for step in ("image", "resources", "network"):
        cli.api.on("PUT", "scheduler", f"{DRAFT}/dr-1/{step}", {"draft_id": "dr-1"})
    cli.api.on(
        "POST", "scheduler", f"{DRAFT}/dr-1/submit", httpx.Response(201, json=samples.workload("wl-9"))
    )


def test_create_by_flags_fills_the_three_steps_in_order_then_submits(cli: Cli) -> None:
    _drafts(cli)
    result = cli("create", *STEPS, "--sg", "sg-default", "--tag", "project=nb", "--urgency", "0.7", "-q")
    assert (result.code, result.out) == (0, "wl-9\n")
    assert [(r.method, r.url.path.removeprefix(DRAFT)) for r in cli.api.seen] == [
        ("POST", ""),
        ("PUT", "/dr-1/image"),
        ("PUT", "/dr-1/resources"),
        ("PUT", "/dr-1/network"),
        ("POST", "/dr-1/submit"),
    ]
    assert cli.api.body("POST", DRAFT) == {"options": {"tags": {"project": "nb"}, "urgency": 0.7}}
    assert cli.api.body("PUT", f"{DRAFT}/dr-1/image") == {"name": "pytorch", "version": "2.3"}
    assert cli.api.body("PUT", f"{DRAFT}/dr-1/resources") == {"kind": "gpu", "model": "A100-80GB", "count": 2}
    assert cli.api.body("PUT", f"{DRAFT}/dr-1/network") == NETWORK


def test_create_off_a_terminal_with_a_step_missing_is_a_usage_error_before_any_request(cli: Cli) -> None:
    result = cli("create", *STEPS)
    assert result.code == 2
    assert "missing --sg" in result.err
    assert cli.api.seen == []


def test_create_in_a_terminal_asks_for_the_missing_steps_with_the_recommendation_as_default(cli: Cli) -> None:
    cli.interactive = True
    _drafts(cli)
    images = [{"name": "pytorch", "framework": "PyTorch", "versions": ["2.3", "2.4"]}]
    cli.api.on("GET", "scheduler", "/v1/images", images)
    advice = {"model": "L4", "count": 1, "reasons": ["fits in 24 GB"]}
    cli.api.on("GET", "scheduler", "/v1/recommendations/gpu", advice)
    answers = "\n\nvpc-main1\nsubnet-a001\nsg-default\n"  # default image, recommended GPU, then the network
    result = cli("create", stdin=answers)
    assert result.code == 0, result.err
    assert cli.api.body("PUT", f"{DRAFT}/dr-1/image") == {"name": "pytorch", "version": "2.4"}
    assert cli.api.body("PUT", f"{DRAFT}/dr-1/resources") == {"kind": "gpu", "model": "L4", "count": 1}
    assert cli.api.body("PUT", f"{DRAFT}/dr-1/network") == NETWORK
    assert cli.api.requests("GET", "/v1/recommendations/gpu")[0].url.params["framework"] == "PyTorch"
    assert "fits in 24 GB" in result.out


def test_a_refused_step_stops_create_with_the_field_the_scheduler_named(cli: Cli) -> None:
    _drafts(cli)
    bad = error(422, "validation_error", "String should match pattern", "network.vpc_id")
    cli.api.on("PUT", "scheduler", f"{DRAFT}/dr-1/network", bad)
    result = cli("create", *STEPS, "--sg", "sg-default")
    assert result.code == 7
    assert "network.vpc_id" in result.err
    assert cli.api.requests("POST", f"{DRAFT}/dr-1/submit") == []


def test_submit_sends_the_spec_file_with_the_flags_laid_over_it(cli: Cli, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "image: {name: pytorch, version: '2.3'}\n"
        "resources: {kind: gpu, model: L4, count: 1}\n"
        "network: {vpc_id: vpc-main1, subnet_id: subnet-a001, security_group_id: sg-default}\n"
        "tags: {project: search, team: ir}\n"
    )
    cli.api.on("POST", "scheduler", "/v1/workloads", httpx.Response(201, json=samples.workload("wl-3")))
    result = cli("submit", "-f", str(spec), "--gpu", "L4:2", "--tag", "team=nlp", "--time-limit", "1h30m")
    assert result.code == 0, result.err
    assert cli.api.body("POST", "/v1/workloads") == {
        "kind": "job",
        "image": {"name": "pytorch", "version": "2.3"},
        "resources": {"kind": "gpu", "model": "L4", "count": 2},
        "network": NETWORK,
        "tags": {"project": "search", "team": "nlp"},
        "time_limit_s": 5400,
    }


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--gpu", "L4:two"), "MODEL[:COUNT]"),
        (("--gpu", "L4", "--units", "2"), "give one of --gpu, --mig and --units"),
        (("--image", "pytorch"), "NAME:VERSION"),
        (("--time-limit", "soon"), "not a duration"),
        (("--tag", "project"), "not key=value"),
    ],
)
def test_submit_refuses_flags_that_cannot_be_a_request_with_exit_2(
    cli: Cli, args: tuple[str, ...], says: str
) -> None:
    result = cli("submit", *args)
    assert result.code == 2
    assert says in result.err
    assert cli.api.seen == []


def test_cancel_tries_each_workload_and_exits_with_the_first_failure(cli: Cli) -> None:
    cli.api.on("POST", "scheduler", "/v1/workloads/wl-1/cancel", samples.workload("wl-1", state="cancelled"))
    cli.api.on(
        "POST",
        "scheduler",
        "/v1/workloads/wl-2/cancel",
        error(404, "not_found", "no workload", "workload_id"),
    )
    result = cli("cancel", "wl-2", "wl-1")
    assert result.code == 4
    assert result.out == "wl-1 cancelled\n"
    assert "wl-2: error: workload_id: no workload (HTTP 404 not_found)" in result.err


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("alertname=GpuMemoryHigh", {"name": "alertname", "op": "=", "value": "GpuMemoryHigh"}),
        ('node=~"gpu-a.*"', {"name": "node", "op": "=~", "value": "gpu-a.*"}),
        ("severity!=info", {"name": "severity", "op": "!=", "value": "info"}),
        ("gpu!~'GPU-1.*'", {"name": "gpu", "op": "!~", "value": "GPU-1.*"}),
        ('summary="say \\"hi\\""', {"name": "summary", "op": "=", "value": 'say "hi"'}),
        ("GpuLost", {"name": "alertname", "op": "=", "value": "GpuLost"}),
    ],
)
def test_silence_add_reads_matchers_as_amtool_writes_them(
    cli: Cli, written: str, sent: dict[str, str]
) -> None:
    cli.api.on("POST", "alerting", "/v1/silences", httpx.Response(201, json=samples.SILENCES[0]))
    result = cli("silence", "add", written, "-c", "maintenance", "-d", "2h")
    assert (result.code, result.out) == (0, samples.SILENCES[0]["id"] + "\n")
    body = cli.api.body("POST", "/v1/silences")
    assert body == {"matchers": [sent], "ends_at": "2026-12-02T05:40:00+00:00", "comment": "maintenance"}


def test_a_matcher_amtool_would_refuse_is_a_usage_error(cli: Cli) -> None:
    result = cli("silence", "add", "bad name=x", "-c", "x")
    assert result.code == 2
    assert "not a matcher" in result.err
    assert cli.api.seen == []


def test_silence_expire_ends_each_and_reports_the_one_it_could_not(cli: Cli) -> None:
    cli.api.on("DELETE", "alerting", "/v1/silences/s-1", httpx.Response(204))
    cli.api.on(
        "DELETE", "alerting", "/v1/silences/s-2", error(404, "not_found", "no silence 's-2'", "silence_id")
    )
    result = cli("silence", "expire", "s-1", "s-2")
    assert result.code == 4
    assert "expired s-1" in result.err
    assert "s-2: error" in result.err


def test_quotas_set_changes_only_the_limits_given(cli: Cli) -> None:
    path = "/v1/admin/tenants/acme/quota"
    current = {"tenant_id": "acme", "limits": {"gpus": 4, "units": 32.0, "workloads": 10}, "usage": {}}

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={**current, "limits": json.loads(request.content)})

    cli.api.on("GET", "scheduler", path, current)
    cli.api.on("PUT", "scheduler", path, echo)
    assert cli("admin", "quotas", "set", "acme", "--gpus", "8", "--units", "unlimited").code == 0
    assert cli.api.body("PUT", path) == {"gpus": 8, "units": None, "workloads": 10}


def test_incidents_watch_follows_the_recovery_until_it_closes(cli: Cli) -> None:
    path = "/v1/incidents/inc-b8441e16bfdc4ad4"
    steps = [samples.incident("migrating", progress=30), samples.incident("migrating", progress=60)]
    cli.api.on("GET", "recovery", path, *steps, samples.incident("resolved", progress=100, closed=True))
    result = cli("incidents", "watch", "inc-b8441e16bfdc4ad4", "--interval", "1")
    assert result.code == 0, result.err
    assert result.out == "inc-b8441e16bfdc4ad4 resolved\n"
    assert [line.split()[-1] for line in result.err.splitlines()] == ["30%", "60%", "100%"]


def test_an_escalated_incident_ends_the_watch_with_exit_1_and_its_reason(cli: Cli) -> None:
    cli.api.on("GET", "recovery", "/v1/incidents/inc-1", samples.incident("escalated"))
    result = cli("incidents", "watch", "inc-1")
    assert result.code == 1
    assert "no healthy GPU to move to" in result.err


def test_a_watch_that_outlasts_its_timeout_exits_1(cli: Cli) -> None:
    cli.api.on("GET", "recovery", "/v1/incidents/inc-1", samples.incident("migrating", progress=10))
    result = cli("incidents", "watch", "inc-1", "--timeout", "5", "--interval", "1")
    assert result.code == 1
    assert "still migrating after 5 s" in result.err
    assert len(cli.api.seen) == 6


def _export(cli: Cli, answer: httpx.Response) -> None:
    cli.api.on("GET", "billing", "/v1/exports/vision", answer)


def test_export_writes_the_download_to_the_file_and_says_how_many_rows(cli: Cli, tmp_path: Path) -> None:
    _export(cli, httpx.Response(200, content=b"PAR1...PAR1", headers={"x-export-rows": "4"}))
    target = tmp_path / "bill.parquet"
    result = cli("export", "vision", "--format", "parquet", "-o", str(target))
    assert result.code == 0, result.err
    assert target.read_bytes() == b"PAR1...PAR1"
    assert "wrote 4 rows (11 bytes)" in result.err
    assert cli.api.seen[0].url.params["format"] == "parquet"


def test_a_refused_export_leaves_no_file_behind(cli: Cli, tmp_path: Path) -> None:
    _export(cli, error(422, "validation_error", "end must be after start", "end"))
    folder = tmp_path / "exports"
    folder.mkdir()
    result = cli("export", "vision", "-o", str(folder / "bill.csv"), "--end", "1970-01-01T00:00:00Z")
    assert result.code == 7
    assert list(folder.iterdir()) == []


def test_export_refuses_an_unknown_format_before_asking(cli: Cli) -> None:
    assert cli("export", "vision", "--format", "xlsx").code == 2
    assert cli.api.seen == []


def test_rules_import_sends_the_file_as_yaml(cli: Cli, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("groups: []\n")
    cli.api.on("POST", "alerting", "/v1/rules/import", {"imported": ["A", "B"]})
    result = cli("rules", "import", str(rules))
    assert (result.code, result.out) == (0, "imported 2 rule(s): A, B\n")
    sent = cli.api.requests("POST", "/v1/rules/import")[0]
    assert (sent.content, sent.headers["content-type"]) == (b"groups: []\n", "application/yaml")


def test_rules_import_replace_asks_to_replace_and_shows_the_warnings(cli: Cli, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("groups: []\n")
    warning = "alert 'A' matches label 'xid', which no series has"
    done = {"imported": ["A"], "replaced": ["A"], "warnings": [warning]}
    cli.api.on("POST", "alerting", "/v1/rules/import", done)
    result = cli("rules", "import", "--replace", str(rules))
    assert result.code == 0
    assert result.out.splitlines() == [
        "imported 1 rule(s): A",
        "replaced: A",
        "warning: alert 'A' matches label 'xid', which no series has",
    ]
    assert cli.api.requests("POST", "/v1/rules/import")[0].url.params["replace"] == "true"


def test_rules_ls_shows_the_condition_and_mode_a_promql_rule_by_its_expression(cli: Cli) -> None:
    stream = {"name": "Hot", "kind": "threshold", "metric": "gpu_temp_c", "comparator": ">",
              "threshold": 90, "for": "1m", "severity": "page", "owner_tenant": None, "mode": "stream",
              "expr": None}  # fmt: skip
    promql = {**stream, "name": "NodeHot", "kind": "promql", "mode": "prometheus",
              "expr": "max by (node) (gpucloud_gpu_temp_c) > 90"}  # fmt: skip
    cli.api.on("GET", "alerting", "/v1/rules", [stream, promql])
    result = cli("rules", "ls")
    assert result.code == 0
    hot, node_hot = (line for line in result.out.splitlines() if line.startswith(("Hot ", "NodeHot ")))
    assert "gpu_temp_c > 90" in hot
    assert "stream" in hot
    assert "max by (node) (gpucloud_gpu_temp_c) > 90" in node_hot
    assert "prometheus" in node_hot


def test_top_once_as_json_is_the_latest_samples(cli: Cli) -> None:
    cli.api.on("GET", "telemetry", "/v1/gpus/latest", samples.LATEST)
    result = cli("top", "-o", "json", "--node", "gpu-a100-02")
    rows: list[dict[str, Any]] = json.loads(result.out)
    assert [r["gpu"] for r in rows] == [s["gpu"] for s in samples.LATEST]
    assert cli.api.seen[0].url.params["node"] == "gpu-a100-02"


def test_admin_tenants_create_quiet_prints_only_the_new_key(cli: Cli) -> None:
    created = {
        "tenant": {"tenant_id": "globex", "name": "Globex", "created_at": "2026-12-02T03:00:00Z"},
        "key": {"key_id": "k1", "tenant_id": "globex", "role": "tenant", "api_key": "gck_k1_secret"},
    }
    cli.api.on("POST", "scheduler", "/v1/admin/tenants", httpx.Response(201, json=created))
    result = cli("admin", "tenants", "create", "globex", "--name", "Globex", "-q")
    assert (result.code, result.out) == (0, "gck_k1_secret\n")
    assert cli.api.body("POST", "/v1/admin/tenants") == {"tenant_id": "globex", "name": "Globex"}


def test_incidents_describe_shows_the_hosts_device_actions_with_exit_status_and_what_they_said(
    cli: Cli,
) -> None:
    detail = samples.incident("escalated") | {
        "actions": [
            {
                "command_id": "inc-b8441e16bfdc4ad4:reboot_node:4",
                "action": "reboot_node",
                "outcome": "failed",
                "node": "gpu-a100-01",
                "gpu": None,
                "reason": "command exited 1",
                "commands": [["systemctl", "reboot"]],
                "exit_code": 1,
                "output": "\nFailed to reboot: Access denied\nmore",
                "at": "2026-12-02T03:30:40.000000Z",
            }
        ]
    }
    cli.api.on("GET", "recovery", "/v1/incidents/inc-1", detail)
    result = cli("incidents", "describe", "inc-1")
    assert result.code == 0, result.err
    row = next(r for r in result.out.splitlines() if "reboot_node" in r and "failed" in r)
    assert row.split()[2:5] == ["reboot_node", "failed", "1"]  # after the AT column (date, time)
    assert "command exited 1; Failed to reboot: Access denied" in " ".join(result.out.split())


def test_incidents_describe_without_device_actions_shows_no_actions_table(cli: Cli) -> None:
    cli.api.on("GET", "recovery", "/v1/incidents/inc-1", samples.incident("migrating", progress=30))
    result = cli("incidents", "describe", "inc-1")
    assert result.code == 0, result.err
    assert "OUTCOME" not in result.out


def _array_answer(count: int) -> dict[str, object]:
    items = [{"index": i, "workload_id": f"wl-{i}", "priority": 0.5, "position": i + 1} for i in range(count)]
    return {"array_id": "arr-1", "tenant_id": "acme", "count": count, "items": items}


def test_submit_array_sends_n_copies_in_one_request_each_told_its_index(cli: Cli) -> None:
    cli.api.on("POST", "scheduler", "/v1/workload-arrays", httpx.Response(201, json=_array_answer(3)))
    result = cli(
        "submit", "--image", "pytorch:2.3", "--gpu", "L4", "--vpc", "vpc-main1", "--subnet", "subnet-a001",
        "--sg", "sg-default", "--env", "SEED=7", "--array", "3", "--idempotency-key", "sweep-1",
        "--", "python", "train.py",
    )  # fmt: skip
    assert result.code == 0, result.err
    (sent,) = cli.api.requests("POST", "/v1/workload-arrays")
    assert sent.headers["Idempotency-Key"] == "sweep-1"
    items = cli.api.body("POST", "/v1/workload-arrays")["items"]
    assert [i["env"] for i in items] == [{"SEED": "7", "GPUCLOUD_ARRAY_TASK_ID": str(n)} for n in range(3)]
    assert {(tuple(i["command"]), i["resources"]["model"]) for i in items} == {(("python", "train.py"), "L4")}
    assert "arr-1: 3 workloads queued (wl-0 .. wl-2)" in result.out
    assert cli.api.requests("POST", "/v1/workloads") == []


def test_submit_array_quiet_prints_one_id_a_line(cli: Cli) -> None:
    cli.api.on("POST", "scheduler", "/v1/workload-arrays", httpx.Response(201, json=_array_answer(2)))
    result = cli("--quiet", "submit", "--image", "pytorch:2.3", "--gpu", "L4", "--array", "2")
    assert (result.code, result.out) == (0, "wl-0\nwl-1\n")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--array", "0"), "--array"),
        (("--array", "10001"), "--array"),
        (("--idempotency-key", "k"), "with --array"),
    ],
)
def test_submit_array_bounds_and_a_key_without_an_array_are_usage_errors(
    cli: Cli, args: tuple[str, ...], says: str
) -> None:
    result = cli("submit", "--image", "pytorch:2.3", *args)
    assert result.code == 2
    assert says in result.err
    assert cli.api.seen == []


def test_ls_pages_through_an_array(cli: Cli) -> None:
    cli.api.on("GET", "scheduler", "/v1/workloads", [samples.workload("wl-1001")])
    result = cli("ls", "--array", "arr-1", "--limit", "1000", "--offset", "1000", "-o", "json")
    assert result.code == 0, result.err
    (sent,) = cli.api.requests("GET", "/v1/workloads")
    assert dict(sent.url.params) == {"limit": "1000", "offset": "1000", "array": "arr-1"}
