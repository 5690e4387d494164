"""The app as scripts meet it: help on one screen, exit codes, errors on stderr, stable JSON, no colour."""

from __future__ import annotations

import io
import json
import sys

import httpx
import pytest
import yaml

from libs.gpuctl.app import hoist_globals
from libs.gpuctl.config import load
from libs.gpuctl.render import console
from tests.unit.gpuctl import samples
from tests.unit.gpuctl.conftest import KEY, Cli, error

GROUPS = [
    (),
    ("contexts",),
    ("silence",),
    ("rules",),
    ("incidents",),
    ("task",),
    ("admin",),
    ("admin", "tenants"),
    ("admin", "keys"),
    ("admin", "quotas"),
    ("admin", "shares"),
]
#: Deliver 1 of issue 20, as the root help must list it.
COMMANDS = [
    "login", "whoami", "contexts", "capacity", "gpus", "top", "create", "submit", "ls", "describe",
    "priority", "cancel", "recommend", "predict", "alerts", "silence", "rules", "incidents", "costs",
    "export", "admin", "logs", "outputs", "task",
]  # fmt: skip


@pytest.mark.parametrize("columns", ["80", "100"])
@pytest.mark.parametrize("group", GROUPS, ids=lambda g: " ".join(g) or "gpuctl")
def test_the_help_of_gpuctl_and_of_each_group_fits_one_screen(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, group: tuple[str, ...], columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    result = cli(*group, "--help")
    assert result.code == 0, result.err
    assert len(result.out.splitlines()) <= 45, result.out  # 24 commands and Typer's completion options


def test_the_root_help_lists_every_command_of_the_issue(cli: Cli) -> None:
    listed = {line.strip(" │").split(" ")[0] for line in cli("--help").out.splitlines()}
    assert set(COMMANDS) <= listed


def test_global_flags_written_after_the_command_are_moved_before_it() -> None:
    args = ["submit", "-f", "job.yaml", "-q", "--context", "prod", "--", "-q"]
    assert hoist_globals(args) == ["-q", "--context", "prod", "submit", "-f", "job.yaml", "--", "-q"]
    assert hoist_globals(["ls", "--context=dev"]) == ["--context=dev", "ls"]


def test_an_unknown_option_is_a_usage_error_with_exit_code_2(cli: Cli) -> None:
    result = cli("ls", "--bogus")
    assert result.code == 2
    assert "No such option: --bogus" in result.err
    assert cli.api.seen == []


def test_a_refused_request_prints_the_services_message_and_field_and_exits_7(cli: Cli) -> None:
    answer = error(422, "validation_error", "pytorch has no version '9'", "image.version")
    cli.api.on("POST", "scheduler", "/v1/workloads", answer)
    result = cli("submit", "--image", "pytorch:9", "--gpu", "L4")
    assert result.code == 7
    assert result.out == ""
    assert result.err == "error: image.version: pytorch has no version '9' (HTTP 422 validation_error)\n"


@pytest.mark.parametrize(
    ("status", "code"), [(401, 3), (403, 3), (404, 4), (409, 5), (429, 5), (500, 6), (503, 6)]
)
def test_each_kind_of_failure_has_its_exit_code(cli: Cli, status: int, code: int) -> None:
    cli.api.on("GET", "scheduler", "/v1/workloads/wl-1", error(status, "x", "refused"))
    assert cli("describe", "wl-1").code == code


def test_json_output_is_the_services_answer_with_sorted_keys(cli: Cli) -> None:
    cli.api.on("GET", "scheduler", "/v1/workloads/wl-1/priority", samples.PRIORITY)
    out = cli("priority", "wl-1", "-o", "json").out
    assert json.loads(out) == samples.PRIORITY
    keys = [line.split(":")[0].strip() for line in out.splitlines() if line.startswith('  "')]
    assert keys == sorted(keys)


def test_yaml_output_reads_back_as_the_same_data(cli: Cli) -> None:
    cli.api.on("GET", "inventory", "/v1/gpus", samples.GPUS)
    assert yaml.safe_load(cli("gpus", "-o", "yaml").out) == samples.GPUS


def test_a_cell_holding_rich_markup_prints_as_written(cli: Cli) -> None:
    row = samples.workload("wl-1")
    row["tags"] = {"project": "[bold red]x[/]"}
    cli.api.on("GET", "scheduler", "/v1/workloads", [row])
    assert "[bold red]x[/]" in cli("ls").out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False)])
def test_a_terminal_gets_colour_unless_no_color_is_set(
    monkeypatch: pytest.MonkeyPatch, no_color: str | None, coloured: bool
) -> None:
    monkeypatch.setattr(sys, "stdout", _Terminal())
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    out = console()
    with out.capture() as captured:
        out.print("failed", style="red")
    assert ("\x1b[31m" in captured.get()) is coloured


def test_login_checks_the_key_and_stores_it_as_the_current_context(cli: Cli) -> None:
    cli.api.on(
        "GET", "scheduler", "/v1/admin/tenants", error(403, "forbidden", "this operation needs an admin key")
    )
    result = cli("login", "--url", "http://gpucloud.test", "--key", "gck_knew_s3cret", "--context", "lab")
    assert result.code == 0, result.err
    assert "tenant key knew" in result.out
    stored = load(cli.config)
    assert stored.current == "lab"
    assert stored.contexts["lab"].api_key == "gck_knew_s3cret"
    assert cli.api.seen[-1].headers["x-api-key"] == "gck_knew_s3cret"


def test_a_key_the_services_refuse_is_not_stored(cli: Cli) -> None:
    cli.api.on(
        "GET", "scheduler", "/v1/admin/tenants", error(401, "unauthorized", "unknown or revoked API key")
    )
    result = cli("login", "--url", "http://gpucloud.test", "--key", "wrong", "--context", "lab")
    assert result.code == 3
    assert "lab" not in load(cli.config).contexts


def test_login_reads_the_key_from_stdin_when_told_to(cli: Cli) -> None:
    cli.api.on("GET", "scheduler", "/v1/admin/tenants", [])
    assert cli("login", "--url", "http://gpucloud.test", "--key", "-", stdin="admin-key\n").code == 0
    assert load(cli.config).contexts["default"].api_key == "admin-key"


def test_whoami_and_contexts_never_print_a_secret(cli: Cli) -> None:
    cli.api.on("GET", "scheduler", "/v1/admin/tenants", error(403, "forbidden", "needs an admin key"))
    who = json.loads(cli("whoami", "-o", "json").out)
    assert (who["context"], who["role"], who["key_id"], who["tenant"]) == (
        "test",
        "tenant",
        "kfeed01",
        "acme",
    )
    listed = cli("contexts", "-o", "json").out + cli("contexts").out + cli("whoami").out
    assert KEY not in listed


def test_gpuctl_api_key_from_the_environment_is_sent_instead_of_the_stored_one(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUCTL_API_KEY", "from-env")
    cli.api.on("GET", "scheduler", "/v1/workloads", [])
    assert cli("ls").code == 0
    assert cli.api.seen[-1].headers["x-api-key"] == "from-env"


def test_contexts_use_switches_and_delete_forgets(cli: Cli) -> None:
    cli.api.on("GET", "scheduler", "/v1/admin/tenants", httpx.Response(200, json=[]))
    cli("login", "--url", "http://other.test", "--key", "k2", "--context", "other")
    assert cli("contexts", "use", "test").code == 0
    assert load(cli.config).current == "test"
    assert cli("contexts", "delete", "other").code == 0
    assert set(load(cli.config).contexts) == {"test"}
    assert cli("contexts", "use", "other").code == 4
