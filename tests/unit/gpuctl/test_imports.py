"""gpuctl talks to the services over HTTP only: it imports no service, no runtime library, no dev tool."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.architecture.layers import ROOT, check_library_file

GPUCTL = ROOT / "libs" / "gpuctl"


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return found | {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}


def test_gpuctl_imports_no_service_and_no_development_tool() -> None:
    broken = [v for p in sorted(GPUCTL.rglob("*.py")) for v in check_library_file(p)]
    assert not broken, "\n".join(str(v) for v in broken)


def test_gpuctl_imports_nothing_of_the_services_runtime_library() -> None:
    """A laptop's CLI needs no asyncpg, Kafka client or FastAPI: libs.common would bring them."""
    leaks = {
        f"{p.relative_to(ROOT)}: {m}"
        for p in sorted(GPUCTL.rglob("*.py"))
        for m in _imported(p)
        if m.startswith("libs.") and not m.startswith("libs.gpuctl")
    }
    assert not leaks, sorted(leaks)
