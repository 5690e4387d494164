"""What runs, from the command line: submit and create send the command, env, workdir and limits."""

from __future__ import annotations

import httpx
import pytest

from tests.unit.gpuctl import samples
from tests.unit.gpuctl.conftest import Cli

DRAFT = "/v1/workloads/drafts"
ONE_SHOT = (
    "--image",
    "pytorch:2.4",
    "--gpu",
    "L4",
    "--vpc",
    "vpc-main1",
    "--subnet",
    "subnet-a001",
    "--sg",
    "sg-default",
)


def _accepts_submit(cli: Cli) -> None:
    cli.api.on("POST", "scheduler", "/v1/workloads", httpx.Response(201, json=samples.workload("wl-3")))


def test_submit_sends_the_words_after_the_double_dash_and_the_run_flags(cli: Cli) -> None:
    _accepts_submit(cli)
    result = cli(
        "submit",
        *ONE_SHOT,
        "--env",
        "WANDB_MODE=offline",
        "--env",
        "SEED=7",
        "--workdir",
        "/workspace",
        "--cpu",
        "1.5",
        "--memory",
        "16Gi",
        "--grace",
        "45s",
        "--",
        "python",
        "train.py",
        "--lr",
        "0.1",
    )
    assert result.code == 0, result.err
    body = cli.api.body("POST", "/v1/workloads")
    assert {
        k: body[k] for k in ("command", "env", "working_dir", "cpu_millis", "memory_bytes", "grace_s")
    } == {
        "command": ["python", "train.py", "--lr", "0.1"],
        "env": {"WANDB_MODE": "offline", "SEED": "7"},
        "working_dir": "/workspace",
        "cpu_millis": 1500,
        "memory_bytes": 16 * 1024**3,
        "grace_s": 45.0,
    }


@pytest.mark.parametrize(
    ("flags", "command", "cpu", "memory"),
    [
        (
            ("--command", "python -c 'print(1)'", "--cpu", "500m", "--memory", "512Mi"),
            ["python", "-c", "print(1)"],
            500,
            512 * 1024**2,
        ),
        (
            ("--command", "nvidia-smi -L", "--cpu", "2", "--memory", "2G"),
            ["nvidia-smi", "-L"],
            2000,
            2 * 1000**3,
        ),
        (("--memory", "1048576", "--", "sleep", "60"), ["sleep", "60"], None, 1048576),
    ],
)
def test_a_command_is_split_as_a_shell_would_and_sizes_read_as_written(
    cli: Cli, flags: tuple[str, ...], command: list[str], cpu: int | None, memory: int
) -> None:
    _accepts_submit(cli)
    assert cli("submit", *ONE_SHOT, *flags).code == 0
    body = cli.api.body("POST", "/v1/workloads")
    assert (body["command"], body.get("cpu_millis"), body["memory_bytes"]) == (command, cpu, memory)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--command", "python a.py", "--", "python", "b.py"), "not both"),
        (("--command", "python 'unclosed"), "--command"),
        (("--cpu", "lots"), "cores (1.5) or millicores (1500m)"),
        (("--cpu", "1.5m"), "cores (1.5) or millicores (1500m)"),
        (("--memory", "16GB"), "16Gi, 512Mi, 2G or bytes"),
        (("--env", "NOVALUE"), "not key=value"),
        (("--grace", "soon"), "not a duration"),
    ],
)
def test_run_flags_that_cannot_be_a_request_exit_2_before_any_request(
    cli: Cli, flags: tuple[str, ...], says: str
) -> None:
    result = cli("submit", *ONE_SHOT, *flags)
    assert result.code == 2
    assert says in result.err
    assert cli.api.seen == []


def test_create_opens_its_draft_with_what_runs(cli: Cli) -> None:
    cli.api.on("POST", "scheduler", DRAFT, httpx.Response(201, json={"draft_id": "dr-1"}))
    for step in ("image", "resources", "network"):
        cli.api.on("PUT", "scheduler", f"{DRAFT}/dr-1/{step}", {"draft_id": "dr-1"})
    cli.api.on(
        "POST", "scheduler", f"{DRAFT}/dr-1/submit", httpx.Response(201, json=samples.workload("wl-9"))
    )

    result = cli("create", *ONE_SHOT, "--env", "A=1", "--command", "jupyter lab --port 8888", "-q")

    assert (result.code, result.out) == (0, "wl-9\n")
    assert cli.api.body("POST", DRAFT) == {
        "options": {"command": ["jupyter", "lab", "--port", "8888"], "env": {"A": "1"}}
    }
