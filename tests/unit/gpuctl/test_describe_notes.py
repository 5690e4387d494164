"""gpuctl describe says the host's notes on a workload's start, one per line, and nothing without them."""

from __future__ import annotations

from typing import Any

from tests.unit.gpuctl import samples
from tests.unit.gpuctl.conftest import Cli

SHARED = "memory not isolated: a time-sliced share without an MPS control daemon on this host"


def _lines(cli: Cli, host: dict[str, Any]) -> list[str]:
    answer = samples.workload("wl-5", state="running", host=host)
    cli.api.on("GET", "scheduler", "/v1/workloads/wl-5", answer)
    result = cli("describe", "wl-5")
    assert result.code == 0, result.err
    return [line.rstrip() for line in result.out.splitlines()]


def test_describe_shows_each_host_note_on_its_own_line_under_the_host(cli: Cli) -> None:
    host = {"pid": 4242, "container_id": None, "runner": "process", "notes": [SHARED, "no limit asked"]}
    lines = _lines(cli, host)
    at = lines.index("Host             pid 4242 (process)")
    assert lines[at + 1 : at + 3] == [f"Notes            {SHARED}", "                 no limit asked"]
    assert lines[at + 3].startswith("Exit")


def test_describe_has_no_notes_line_when_the_host_said_none(cli: Cli) -> None:
    lines = _lines(cli, {"pid": 4242, "container_id": None, "runner": "process", "notes": []})
    assert not any(line.startswith("Notes") for line in lines)
