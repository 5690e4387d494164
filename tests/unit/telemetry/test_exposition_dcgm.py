"""/metrics/gpus as dcgm-exporter writes it: its labels beside ours, lost GPUs kept, XIDs from zero."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from services.telemetry.api.exposition import HEALTH_FAIL, HEALTH_PASS, LastXid, render
from services.telemetry.domain.xid import XID_DESCRIPTIONS

READINGS = {
    "sm_util_pct": 40.0,
    "fb_used_bytes": 20,
    "fb_total_bytes": 80,
    "gpu_temp_c": 51.0,
    "xid_count": 0,
}
H100 = "NVIDIA H100 80GB HBM3"
ANSWERING: dict[str, Any] = {"gpu": "GPU-a", "index": 0, "model": H100, "node": "n1", **READINGS}
LOST: dict[str, Any] = {
    "gpu": "GPU-b",
    "index": 1,
    "model": H100,
    "node": "n1",
    "xid_count": 2,
    "xid_counts": {"79": 2},
    "lost_reason": "GPU is lost (NVML_ERROR_GPU_IS_LOST)",
}
MIG: dict[str, Any] = {**ANSWERING, "gpu": "MIG-a1", "parent_gpu": "GPU-a", "xid_count": None}
#: promtool's findings that dcgm-exporter compatibility keeps; docs/telemetry.md ("The exposition") says why.
CAMEL_CASE = "label names should be written in 'snake_case' not 'camelCase'"
ACCEPTED_SUFFIX = {
    f'{name} counter metrics should have "_total" suffix'
    for name in (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_EXP_XID_ERRORS_TOTAL",
    )
}


def _series(text: str, family: str) -> list[Sample]:
    return [s for f in text_string_to_metric_families(text) if f.name == family for s in f.samples]


def test_every_gpu_series_carries_dcgm_exporters_labels_beside_ours() -> None:
    known_bus = {**ANSWERING, "gpu": "GPU-c", "index": 2, "node": "n2", "pci_bus_id": "00000000:1A:00.0"}
    text = render([ANSWERING | {"workload_id": "w1", "tenant_id": "acme"}, known_bus, MIG])
    by_uuid = {s.labels["uuid"]: s.labels for s in _series(text, "DCGM_FI_DEV_GPU_UTIL")}
    assert by_uuid["GPU-a"] == {
        "gpu": "0",
        "UUID": "GPU-a",
        "device": "nvidia0",
        "modelName": H100,
        "Hostname": "n1",
        "uuid": "GPU-a",
        "node": "n1",
        "model": H100,
        "workload": "w1",
        "tenant": "acme",
    }
    assert by_uuid["GPU-c"]["pci_bus_id"] == "00000000:1A:00.0"
    assert (by_uuid["GPU-c"]["gpu"], by_uuid["GPU-c"]["device"], by_uuid["GPU-c"]["Hostname"]) == (
        "2",
        "nvidia2",
        "n2",
    )
    assert (by_uuid["MIG-a1"]["UUID"], by_uuid["MIG-a1"]["parent_uuid"]) == ("GPU-a", "GPU-a")
    dcgm = {"gpu", "UUID", "device", "modelName", "Hostname"}
    every = [s for f in text_string_to_metric_families(text) for s in f.samples]
    assert len(every) > 3
    assert all(dcgm <= set(s.labels) for s in every)


def test_tensor_activity_is_dcgm_exporters_ratio_with_the_same_labels_only_where_the_sample_has_it() -> None:
    busy = ANSWERING | {"tensor_active_pct": 37.5}
    without = {**ANSWERING, "gpu": "GPU-q", "index": 1}  # no GPM, or its first sample
    text = render([busy, without, LOST | {"tensor_active_pct": 50.0}, MIG | {"tensor_active_pct": 12.0}])
    [family] = [
        f for f in text_string_to_metric_families(text) if f.name == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
    ]
    assert family.type == "gauge"
    assert "ratio" in family.documentation
    assert {s.labels["uuid"]: s.value for s in family.samples} == {"GPU-a": 0.375, "MIG-a1": 0.12}
    gpu_util = {s.labels["uuid"]: s.labels for s in _series(text, "DCGM_FI_DEV_GPU_UTIL")}
    assert all(s.labels == gpu_util[s.labels["uuid"]] for s in family.samples)
    assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" not in render([without])  # no family without a value


def test_a_lost_gpu_keeps_its_health_xid_and_lost_series_but_exports_no_readings() -> None:
    text = render([ANSWERING, LOST])

    def of(name: str) -> dict[str, float]:
        return {s.labels["uuid"]: s.value for s in _series(text, name) if s.labels.get("xid", "79") == "79"}

    assert of("DCGM_EXP_GPU_HEALTH_STATUS") == {"GPU-a": HEALTH_PASS, "GPU-b": HEALTH_FAIL}
    assert of("gpucloud_gpu_lost") == {"GPU-a": 0.0, "GPU-b": 1.0}
    assert of("DCGM_EXP_XID_ERRORS_TOTAL") == {"GPU-a": 0.0, "GPU-b": 2.0}
    assert of("DCGM_FI_DEV_XID_ERRORS") == {"GPU-a": 0.0, "GPU-b": 79.0}
    assert of("DCGM_FI_DEV_GPU_UTIL") == {"GPU-a": 40.0}
    [health] = [s for s in _series(text, "DCGM_EXP_GPU_HEALTH_STATUS") if s.labels["uuid"] == "GPU-b"]
    assert (health.labels["health_watch"], health.labels["Hostname"]) == ("ALL", "n1")


def test_xid_counters_are_born_at_zero_for_every_catalog_code_and_count_other_codes_raised() -> None:
    raised = {**ANSWERING, "xid_count": 3, "xid_counts": {"48": 2, "150": 1}}
    text = render([raised, ANSWERING | {"gpu": "GPU-q", "index": 1}, MIG])
    [family] = [f for f in text_string_to_metric_families(text) if f.name == "DCGM_EXP_XID_ERRORS_TOTAL"]
    assert family.type == "counter"
    counts = {(s.labels["uuid"], int(s.labels["xid"])): s.value for s in family.samples}
    catalog = set(XID_DESCRIPTIONS)
    assert {code for gpu, code in counts if gpu == "GPU-q"} == catalog
    assert {code for gpu, code in counts if gpu == "GPU-a"} == catalog | {150}
    assert {gpu for gpu, _ in counts} == {"GPU-a", "GPU-q"}  # a MIG instance's XIDs are its parent's
    assert (counts[("GPU-a", 48)], counts[("GPU-a", 150)], counts[("GPU-a", 79)]) == (2.0, 1.0, 0.0)
    assert all(v == 0.0 for (gpu, _), v in counts.items() if gpu == "GPU-q")


def test_the_last_xid_gauge_shows_the_code_whose_count_grew_since_the_previous_render() -> None:
    last = LastXid()

    def gauge(codes: dict[str, int]) -> float:
        sample = {**ANSWERING, "xid_count": sum(codes.values()), "xid_counts": codes}
        [series] = _series(render([sample], last_xid=last), "DCGM_FI_DEV_XID_ERRORS")
        return series.value

    assert [gauge({}), gauge({"79": 1}), gauge({"13": 1, "79": 1}), gauge({"13": 1, "79": 1})] == [
        0,
        79,
        13,
        13,
    ]
    assert gauge({"13": 1, "79": 2}) == 79
    assert gauge({"31": 1, "48": 1, "13": 1, "79": 2}) == 48  # several in one interval: the highest


def test_promtool_check_metrics_finds_nothing_but_the_documented_dcgm_naming_warnings() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(
            "promtool is not installed (scripts/ensure-prometheus-tools.sh installs it; make test runs it)"
        )
    raised = {**ANSWERING, "gpu": "GPU-x", "index": 3, "xid_count": 3, "xid_counts": {"13": 1, "94": 2}}
    fleet = [
        ANSWERING
        | {
            "workload_id": "w1",
            "tenant_id": "acme",
            "ecc_sbe_count": 4,
            "ecc_dbe_count": 0,
            "tensor_active_pct": 33.3,
        },
        LOST,
        MIG,
        raised | {"throttle_reasons": 4, "power_w": 301.5, "pcie_tx_bytes_per_s": 1.5e9},
        {
            **ANSWERING,
            "gpu": "GPU-y",
            "index": 0,
            "node": "n2",
            "model": 'odd "name"\\',
            "pci_bus_id": "0:1:0.0",
        },
    ]
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=render(fleet),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    findings = {line for line in (checked.stdout + checked.stderr).splitlines() if line.strip()}
    unexpected = {
        f
        for f in findings
        if f not in ACCEPTED_SUFFIX and not re.fullmatch(rf"\S+ {re.escape(CAMEL_CASE)}", f)
    }
    assert checked.returncode in (0, 3), findings  # 3: lint findings only, 1: the text did not parse
    assert unexpected == set()
    assert findings >= ACCEPTED_SUFFIX  # the documented list stays true
