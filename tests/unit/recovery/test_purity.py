"""The recovery core stays pure: no IO libraries, no other service, no clock reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[3] / "services" / "recovery"
# The IO adapters around the core; every other module (new ones included) must stay pure.
ADAPTERS = {
    "__main__.py",
    "api.py",
    "app.py",
    "effects.py",
    "handlers.py",
    "loops.py",
    "metrics.py",
    "settings.py",
    "store.py",
    "views.py",
    "window.py",
}
MODULES = sorted(p for p in CORE.glob("*.py") if p.name not in ADAPTERS)
IO_ROOTS = {
    "asyncio",
    "aiokafka",
    "asyncpg",
    "redis",
    "httpx",
    "fastapi",
    "socket",
    "subprocess",
    "os",
    "time",
}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic"}


def imported_roots(tree: ast.AST) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module)
    return roots


def test_the_core_has_modules_to_check() -> None:
    assert len(MODULES) >= 8


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_a_core_module_imports_no_io_library_and_no_other_service(path: Path) -> None:
    imports = imported_roots(ast.parse(path.read_text()))
    assert not {name for name in imports if name.split(".")[0] in IO_ROOTS}
    other_services = {
        n for n in imports if n.startswith("services.") and not n.startswith("services.recovery")
    }
    assert not other_services


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_a_core_module_never_reads_the_clock(path: Path) -> None:
    calls = [
        node.func.attr
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]
    assert not set(calls) & CLOCK_CALLS
