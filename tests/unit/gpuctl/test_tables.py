"""Golden tables: each read's table at COLUMNS=100, byte for byte, off a terminal (so with no colour).

After a deliberate change of a table, rewrite the files with ``GPUCTL_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.unit.gpuctl import samples
from tests.unit.gpuctl.conftest import Cli

GOLDEN = Path(__file__).parent / "golden"


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    service: str
    path: str
    answer: Any


CASES = [
    Case("capacity", ("capacity",), "inventory", "/v1/capacity", samples.CAPACITY),
    Case("gpus", ("gpus",), "inventory", "/v1/gpus", samples.GPUS),
    Case("top", ("top", "--once"), "telemetry", "/v1/gpus/latest", samples.LATEST),
    Case(
        "ls",
        ("ls",),
        "scheduler",
        "/v1/workloads",
        [samples.workload("wl-2", position=1), samples.workload("wl-1", state="running")],
    ),
    Case("describe", ("describe", "wl-1"), "scheduler", "/v1/workloads/wl-1", samples.workload("wl-1")),
    Case(
        "describe_exited",
        ("describe", "wl-4"),
        "scheduler",
        "/v1/workloads/wl-4",
        samples.workload(
            "wl-4",
            state="failed",
            host={"pid": 4242, "container_id": None, "runner": "process"},
            exited={"reason": "oom_killed", "code": None, "signal": 9},
        ),
    ),
    Case("priority", ("priority", "wl-1"), "scheduler", "/v1/workloads/wl-1/priority", samples.PRIORITY),
    Case("costs", ("costs", "--by", "tag:team"), "billing", "/v1/costs", samples.COSTS),
    Case("silences", ("silence", "ls"), "alerting", "/v1/silences", samples.SILENCES),
    Case(
        "incidents", ("incidents",), "recovery", "/v1/incidents", [samples.incident("migrating", progress=40)]
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_table_of_each_read_matches_its_golden_file_at_100_columns(cli: Cli, case: Case) -> None:
    cli.api.on("GET", case.service, case.path, case.answer)
    result = cli(*case.args)
    assert result.code == 0, result.err
    golden = GOLDEN / f"{case.name}.txt"
    if os.environ.get("GPUCTL_UPDATE_GOLDEN"):
        golden.write_text(result.out, encoding="utf-8")
    assert result.out == golden.read_text(encoding="utf-8")
    assert "\x1b[" not in result.out, "no colour off a terminal"
    assert max(len(line) for line in result.out.splitlines()) <= 100
