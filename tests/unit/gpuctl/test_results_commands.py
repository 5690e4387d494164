"""gpuctl logs, outputs and task against the fake services: what each sends, prints and exits with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from libs.gpuctl.commands.results import sse_events
from tests.unit.gpuctl.conftest import Cli, error

LOGS = "/v1/workloads/wl-1/logs"


def _task(state: str, **result: Any) -> dict[str, Any]:
    base = "/v1/workloads/wl-1"
    body: dict[str, Any] = {
        "workload_id": "wl-1",
        "state": state,
        "exit_reason": None,
        "exit_code": None,
        "signal": None,
        "reason": None,
        "log_tail": None,
        "outputs": None,
        "links": {"workload": base, "logs": f"{base}/logs", "outputs": f"{base}/outputs"},
    }
    return body | result


def test_logs_prints_the_log_as_it_came_and_passes_tail_since_and_placement(cli: Cli) -> None:
    cli.api.on("GET", "scheduler", LOGS, httpx.Response(200, text="one\ntwo"))
    result = cli("logs", "wl-1", "--tail", "2", "--since", "5m", "--placement", "pl-a")
    assert (result.code, result.out) == (0, "one\ntwo")
    params = cli.api.requests("GET", LOGS)[0].url.params
    assert dict(params) == {"tail": "2", "since": "5m", "placement": "pl-a"}


def test_a_cut_log_says_so_on_stderr(cli: Cli) -> None:
    cut = httpx.Response(200, text="end\n", headers={"X-Log-Truncated": "true", "X-Log-Omitted-Bytes": "99"})
    cli.api.on("GET", "scheduler", LOGS, cut)
    result = cli("logs", "wl-1")
    assert result.out == "end\n"
    assert "first 99 bytes are left out" in result.err


def test_logs_follow_prints_each_event_until_the_end_and_skips_pings(cli: Cli) -> None:
    stream = (
        ": ping - 2026-12-02 00:00:00\r\n\r\n"
        "id: pl-a/0\r\nevent: log\r\ndata: one\r\ndata: two\r\ndata: \r\n\r\n"
        "event: log\r\ndata: three\r\n\r\n"
        'event: end\r\ndata: {"complete": true}\r\n\r\n'
        "event: log\r\ndata: never\r\n\r\n"
    )
    cli.api.on("GET", "scheduler", LOGS, httpx.Response(200, text=stream))
    result = cli("logs", "wl-1", "-f")
    assert (result.code, result.out) == (0, "one\ntwo\nthree")
    assert cli.api.requests("GET", LOGS)[0].url.params["follow"] == "true"


def test_the_event_reader_joins_data_lines_and_reads_a_last_event_without_a_blank_line() -> None:
    lines = ["event: log", "data: a", "data:b", "", ":comment", "data: tail"]
    assert list(sse_events(iter(lines))) == [("log", "a\nb"), ("message", "tail")]


def test_logs_of_another_tenants_workload_is_exit_4_with_the_message(cli: Cli) -> None:
    cli.api.on("GET", "scheduler", LOGS, error(404, "not_found", "no workload 'wl-1'", "workload_id"))
    result = cli("logs", "wl-1", "-f")
    assert result.code == 4
    assert "no workload 'wl-1'" in result.err


def test_outputs_lists_the_manifest_and_downloads_one_file_to_the_path_given(
    cli: Cli, tmp_path: Path
) -> None:
    manifest = {
        "workload_id": "wl-1",
        "placement_id": "pl-a",
        "files": [{"path": "model/w.bin", "size": 3}],
        "total_bytes": 3,
        "dropped": [{"path": "huge.bin", "size": 10**10, "why": "over the cap"}],
    }
    cli.api.on("GET", "scheduler", "/v1/workloads/wl-1/outputs", manifest)
    listed = cli("outputs", "wl-1")
    assert listed.code == 0, listed.err
    assert "model/w.bin" in listed.out
    assert "over the cap" in listed.out
    as_json = cli("outputs", "wl-1", "--format", "json")
    assert json.loads(as_json.out) == manifest
    cli.api.on(
        "GET", "scheduler", "/v1/workloads/wl-1/outputs/model/w.bin", httpx.Response(200, content=b"abc")
    )
    target = tmp_path / "w.bin"
    got = cli("outputs", "wl-1", "model/w.bin", "-o", str(target))
    assert got.code == 0, got.err
    assert target.read_bytes() == b"abc"
    piped = cli("outputs", "wl-1", "model/w.bin", "-o", "-")
    assert piped.out == "abc"


def test_an_output_path_with_url_characters_is_sent_quoted(cli: Cli, tmp_path: Path) -> None:
    odd = "run #1/50%?.txt"
    cli.api.on("GET", "scheduler", f"/v1/workloads/wl-1/outputs/{odd}", httpx.Response(200, content=b"ok"))
    got = cli("outputs", "wl-1", odd, "-o", str(tmp_path / "x"))
    assert got.code == 0, got.err
    assert (tmp_path / "x").read_bytes() == b"ok"
    sent = cli.api.requests("GET", f"/v1/workloads/wl-1/outputs/{odd}")[-1]
    assert sent.url.raw_path == b"/v1/workloads/wl-1/outputs/run%20%231/50%25%3F.txt"


def test_task_run_submits_a_job_and_exits_with_its_exit_code_after_printing_the_log_tail(cli: Cli) -> None:
    ended = _task(
        "failed",
        exit_reason="failed",
        exit_code=3,
        reason="exit code 3",
        log_tail="working\nboom\n",
        outputs=[{"path": "out.txt", "size": 2}],
    )
    cli.api.on("POST", "scheduler", "/v1/tasks", ended)
    result = cli(
        "task", "run", "--image", "pytorch:2.3", "--gpu", "L4", "--wait", "20s", "--", "python", "x.py"
    )
    assert result.code == 3, result.err
    assert result.out.startswith("working\nboom\n")
    assert "failed, exit code 3" in result.out
    assert "out.txt" in result.out
    body = cli.api.body("POST", "/v1/tasks")
    assert (body["kind"], body["command"], body["wait_s"]) == ("job", ["python", "x.py"], 15)


def test_task_run_waits_in_rounds_and_exits_124_when_the_job_did_not_end_within_the_wait(cli: Cli) -> None:
    cli.api.on("POST", "scheduler", "/v1/tasks", httpx.Response(202, json=_task("running")))
    cli.api.on("GET", "scheduler", "/v1/tasks/wl-1", httpx.Response(202, json=_task("running")))
    result = cli("task", "run", "--command", "sleep 600", "--wait", "1m")
    assert result.code == 124
    assert "did not end within 1m" in result.err
    asked = [cli.api.body("POST", "/v1/tasks")["wait_s"]] + [
        float(r.url.params["wait_s"]) for r in cli.api.requests("GET", "/v1/tasks/wl-1")
    ]
    assert asked == [15, 25.0, 20.0], "a shorter first round; all far within the read timeout"


def test_task_get_of_a_job_killed_by_a_signal_exits_128_plus_the_signal(cli: Cli) -> None:
    killed = _task("cancelled", exit_reason="cancelled", signal=9, log_tail="")
    cli.api.on("GET", "scheduler", "/v1/tasks/wl-1", killed)
    result = cli("task", "get", "wl-1", "-o", "json")
    assert result.code == 137
    assert json.loads(result.out)["signal"] == 9
