"""Fixtures of the runner tests: a state directory whose runs never outlive the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.telemetry.runs import kill_runs


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """The runners' state dir; whatever still runs under it is killed after the test."""
    yield tmp_path / "runs"
    kill_runs(tmp_path / "runs")
