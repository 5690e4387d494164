"""Every module of every service obeys the rules of the layer its folder names (see ``layers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.architecture.layers import (
    ROOT,
    Violation,
    check_library_file,
    check_service_tree,
)

SERVICES = sorted(p for p in (ROOT / "services").iterdir() if p.is_dir() and (p / "__init__.py").exists())

#: Imports that break a rule today, each with the reason it is still there. The list only shrinks:
#: an entry that no longer matches a violation fails ``test_every_known_exception_is_still_needed``.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _report(violations: list[Violation]) -> str:
    return "\n".join(str(v) for v in violations)


def _unexpected(violations: list[Violation]) -> list[Violation]:
    return [v for v in violations if (v.path, v.what) not in KNOWN_EXCEPTIONS]


def test_there_are_seven_services_to_check() -> None:
    assert [p.name for p in SERVICES] == [
        "alerting", "billing", "gateway", "inventory", "recovery", "scheduler", "telemetry",
    ]  # fmt: skip


@pytest.mark.parametrize("service", SERVICES, ids=lambda p: p.name)
def test_every_module_obeys_the_rules_of_its_layer(service: Path) -> None:
    broken = _unexpected(check_service_tree(service))
    assert not broken, "layering broken:\n" + _report(broken)


def test_the_runtime_library_imports_no_service_and_no_development_tool() -> None:
    broken = [v for p in sorted((ROOT / "libs" / "common").rglob("*.py")) for v in check_library_file(p)]
    assert not broken, "layering broken:\n" + _report(broken)


def test_every_known_exception_is_still_needed() -> None:
    found = {(v.path, v.what) for service in SERVICES for v in check_service_tree(service)}
    stale = sorted(set(KNOWN_EXCEPTIONS) - found)
    assert not stale, f"remove these from KNOWN_EXCEPTIONS, they no longer happen: {stale}"
