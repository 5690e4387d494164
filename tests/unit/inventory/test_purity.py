"""The inventory core stays pure: no IO libraries, no other services, no clock reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[3] / "services" / "inventory"
ALLOWED_ROOTS = {
    "__future__", "collections", "dataclasses", "datetime", "decimal", "enum", "importlib",
    "itertools", "pathlib", "typing", "uuid", "pydantic", "yaml", "services",
}  # fmt: skip
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}


# The pure domain core; app.py, settings.py and __main__.py are the wiring around it.
DOMAIN = [
    "capacity",
    "catalog",
    "errors",
    "fleetfile",
    "health",
    "mig",
    "partitioning",
    "records",
    "registry",
]
DOMAIN += ["timeslice", "units"]


def modules() -> list[Path]:
    return [SOURCE / f"{name}.py" for name in DOMAIN]


def imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.name)
def test_core_module_imports_only_pure_libraries_and_its_own_package(path: Path) -> None:
    names = imported(ast.parse(path.read_text(encoding="utf-8")))
    assert {n.split(".")[0] for n in names} <= ALLOWED_ROOTS
    assert all(n.startswith("services.inventory") for n in names if n.startswith("services"))


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.name)
def test_core_module_never_reads_the_clock(path: Path) -> None:
    calls = {
        node.func.attr
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert not calls & CLOCK_CALLS
