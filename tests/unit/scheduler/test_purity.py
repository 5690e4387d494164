"""The scheduler's domain core stays pure: no IO libraries, no clock reads, no other service."""

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[3] / "services" / "scheduler"
MODULES = [
    "advice", "backfill", "catalog", "cluster", "creation", "decisions", "errors", "fit", "index", "model",
    "placement", "pools", "preemption", "priority", "quota", "reserved", "schedule_pass", "state",
]  # fmt: skip
FORBIDDEN = ("asyncio", "asyncpg", "redis", "aiokafka", "httpx", "fastapi", "os", "socket", "libs", "time")


def imported(module: str) -> set[str]:
    tree = ast.parse((CORE / f"{module}.py").read_text(encoding="utf-8"))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return names


@pytest.mark.parametrize("module", MODULES)
def test_core_module_imports_no_io_and_no_other_service(module: str) -> None:
    for name in imported(module):
        assert name.split(".")[0] not in FORBIDDEN, name
        assert not name.startswith("services.") or name.startswith("services.scheduler."), name


@pytest.mark.parametrize("module", MODULES)
def test_core_module_never_reads_the_clock(module: str) -> None:
    source = (CORE / f"{module}.py").read_text(encoding="utf-8")
    assert ".now(" not in source
    assert "utcnow" not in source
