"""Shared fixtures for alerting's pure domain tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def gpu_labels() -> dict[str, str]:
    return {
        "gpu": "GPU-1",
        "node": "node-a",
        "model": "A100",
        "pool": "p1",
        "tenant": "acme",
        "workload": "w1",
    }
