"""Repository conventions: migration files, service boundaries, no import-time connections."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from libs.common.db.migrate import SERVICES, discover, service_migrations

ROOT = Path(__file__).resolve().parents[3]


def test_badly_named_migration_is_refused(tmp_path: Path) -> None:
    (tmp_path / "0001_ok.sql").write_text("SELECT 1;")
    (tmp_path / "2_bad.sql").write_text("SELECT 1;")
    with pytest.raises(ValueError, match=r"NNNN_name\.sql"):
        discover(tmp_path, label="x")


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_has_numbered_contiguous_migrations_after_the_platform_ones(service: str) -> None:
    migrations = service_migrations(service)
    assert migrations[0].id == "platform/0001_platform.sql"
    own = [m.id.split("/")[1] for m in migrations if m.id.startswith(f"{service}/")]
    numbers = [int(name[:4]) for name in own]
    assert numbers == list(range(1, len(numbers) + 1))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("service", SERVICES)
def test_services_never_import_each_other(service: str) -> None:
    others = tuple(f"services.{s}" for s in SERVICES if s != service)
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in _imports(path) if m.startswith(others))
        for path in (ROOT / "services" / service).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_shared_library_never_imports_a_service() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "libs").rglob("*.py")
        if any(m.startswith("services") for m in _imports(path))
    ]
    assert offenders == []


_CONNECT_AT_IMPORT = re.compile(
    r"^(\w+\s*=\s*)?(await\s+)?\w*(create_pool|connect|Redis\.from_url|Settings)\(", re.M
)


def test_nothing_connects_or_reads_settings_at_import_time() -> None:
    offenders = []
    for path in [*(ROOT / "libs").rglob("*.py"), *(ROOT / "services").rglob("*.py")]:
        module_level = [
            ast.get_source_segment(path.read_text(), node) or ""
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.Assign | ast.Expr | ast.AnnAssign)
        ]
        if any(_CONNECT_AT_IMPORT.search(segment) for segment in module_level):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
