"""A fault that names its own cause (XID 79: off the bus) is diagnosed so, unless telemetry says more."""

from __future__ import annotations

from datetime import timedelta

from services.recovery.domain.catalog import CATALOG_CONFIDENCE, FaultCatalog, catalog_finding
from services.recovery.domain.correlate import Cause, FaultContext, TelemetrySample, diagnose
from tests.unit.recovery.conftest import T0

FAULT = FaultContext(gpu="g1", node="n1", workload_ids=("w1",), at=T0)


def _hot(second: int) -> TelemetrySample:
    return TelemetrySample(
        gpu="g1",
        at=T0 - timedelta(seconds=second),
        sm_util_pct=90,
        fb_used_pct=50,
        pcie_tx_bytes_per_s=0,
        pcie_rx_bytes_per_s=0,
        gpu_temp_c=95,
        power_w=300,
        power_limit_w=700,
        throttle_reasons=0,
        xid_count=0,
    )


def test_xid_79_without_telemetry_is_diagnosed_as_fallen_off_the_bus(catalog: FaultCatalog) -> None:
    for key in ("xid_79", "gpu_lost"):
        diagnosis = diagnose(fault=FAULT, own_samples=[], prior=catalog_finding(catalog.get(key)))
        assert diagnosis.probable_cause is Cause.GPU_FELL_OFF_BUS
        assert diagnosis.confidence == CATALOG_CONFIDENCE > 0
        assert [f.rule for f in diagnosis.findings] == ["fault_catalog"]
        assert diagnosis.findings[0].evidence["fault_type"] == key


def test_a_telemetry_finding_outweighs_the_catalog(catalog: FaultCatalog) -> None:
    samples = [_hot(s) for s in range(1, 30)]
    diagnosis = diagnose(fault=FAULT, own_samples=samples, prior=catalog_finding(catalog.get("xid_79")))
    assert diagnosis.probable_cause is Cause.THERMAL_THROTTLING
    assert [f.rule for f in diagnosis.findings] == ["thermal_throttling", "fault_catalog"]


def test_a_fault_that_names_no_cause_stays_unknown_without_telemetry(catalog: FaultCatalog) -> None:
    assert catalog_finding(catalog.get("xid_48")) is None
    assert diagnose(fault=FAULT, own_samples=[], prior=None).probable_cause is Cause.UNKNOWN
