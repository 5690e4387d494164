from __future__ import annotations

from services.telemetry.domain.metrics import XidEvent
from services.telemetry.domain.xid import XidCounter
from tests.unit.telemetry.conftest import T0


def xid(gpu: str, code: int) -> XidEvent:
    return XidEvent(gpu_uuid=gpu, node="n", xid=code, timestamp=T0)


def test_xids_are_counted_per_gpu_and_code() -> None:
    counter = XidCounter()
    counter.record([xid("GPU-a", 79), xid("GPU-a", 79), xid("GPU-a", 13), xid("GPU-b", 79)])
    assert counter.totals() == {"GPU-a": {79: 2, 13: 1}, "GPU-b": {79: 1}}


def test_totals_are_monotonic_while_deltas_restart_each_batch() -> None:
    counter = XidCounter()
    counter.record([xid("GPU-a", 48)])
    assert counter.take_delta() == {"GPU-a": {48: 1}}
    counter.record([xid("GPU-a", 48), xid("GPU-a", 48)])
    assert counter.take_delta() == {"GPU-a": {48: 2}}
    assert counter.total(gpu_uuid="GPU-a", xid=48) == 3


def test_a_quiet_interval_has_an_empty_delta_but_keeps_totals() -> None:
    counter = XidCounter()
    counter.record([xid("GPU-a", 31)])
    counter.take_delta()
    assert counter.take_delta() == {}
    assert counter.total(gpu_uuid="GPU-a", xid=31) == 1
    assert counter.total(gpu_uuid="GPU-z", xid=31) == 0
