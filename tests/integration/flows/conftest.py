"""The `suite` fixture: all six services and the node agent as processes, isolated per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from pathlib import Path

import pytest

from tests.integration.flows.suite import Suite, running_suite
from tests.integration.support import Isolation


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
async def suite(isolation: Isolation, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Suite]:
    """The whole suite against this test's slice of the real broker, Postgres and Redis."""
    async with running_suite(isolation, tmp_path) as running:
        yield running
        if request.node.stash.get(_FAILED, True):
            print(f"\nlogs of the suite (test failed):\n{running.log_tails()}")
