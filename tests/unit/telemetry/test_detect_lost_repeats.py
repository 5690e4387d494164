"""A GPU that stays lost is signalled again while its readings say lost (issue 17, item 5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from services.telemetry.service.detect import DetectorConfig, FaultDetector

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LOST: dict[str, Any] = {
    "gpu": "g1",
    "index": 0,
    "model": "H100",
    "xid_count": 1,
    "lost_reason": "off the bus",
}
ANSWERING: dict[str, Any] = {"gpu": "g1", "index": 0, "model": "H100", "xid_count": 1, "gpu_temp_c": 50.0}


def _kinds(detector: FaultDetector, second: int, sample: dict[str, Any]) -> list[str]:
    return [f.kind for f in detector.observe(node="n1", at=T0 + timedelta(seconds=second), sample=sample)]


def test_a_lost_gpu_is_signalled_again_every_repeat_while_it_stays_lost() -> None:
    detector = FaultDetector(config=DetectorConfig(lost_repeat_s=60))
    # The first lost reading is the agent's to signal; the detector repeats it every 60 s after.
    signalled = [s for s in range(0, 181) if _kinds(detector, s, LOST) == ["lost"]]
    assert signalled == [60, 120, 180]


def test_a_gpu_that_answers_again_starts_over() -> None:
    detector = FaultDetector(config=DetectorConfig(lost_repeat_s=60))
    for s in range(0, 50):
        assert _kinds(detector, s, LOST) == []
    assert _kinds(detector, 50, ANSWERING) == []
    assert [s for s in range(51, 170) if _kinds(detector, s, LOST)] == [111]


def test_the_repeat_names_the_gpu_the_reason_and_where_it_came_from() -> None:
    detector = FaultDetector(config=DetectorConfig(lost_repeat_s=10))
    detector.observe(node="n1", at=T0, sample=LOST)
    (fault,) = detector.observe(node="n1", at=T0 + timedelta(seconds=10), sample=LOST)
    assert (fault.kind, fault.gpu_uuid, fault.node) == ("lost", "g1", "n1")
    assert (fault.evidence["reason"], fault.evidence["source"]) == ("off the bus", "samples")
