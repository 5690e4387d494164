"""A tenant sees only samples taken while the GPU served it, not its previous holder's last sample."""

from __future__ import annotations

from typing import Any

from services.telemetry.api.views import taken_for

ROWS: list[dict[str, Any]] = [
    {"gpu": "GPU-0", "tenant_id": "acme", "workload_id": "wl-a"},
    {"gpu": "GPU-1", "tenant_id": "globex", "workload_id": "wl-g"},  # just reallocated to acme
    {"gpu": "GPU-2", "tenant_id": None, "workload_id": None},  # sampled before the agent knew
]


def test_a_tenant_sees_only_samples_taken_for_it() -> None:
    assert [r["gpu"] for r in taken_for(ROWS, "acme")] == ["GPU-0"]
    assert [r["gpu"] for r in taken_for(ROWS, "globex")] == ["GPU-1"]
    assert taken_for(ROWS, "initech") == []


def test_admin_sees_every_sample() -> None:
    assert taken_for(ROWS, None) == ROWS
