"""Prometheus text exposition of every GPU: dcgm-exporter's names and labels, with allocation labels.

Every series carries dcgm-exporter's labels (``gpu``, ``UUID``, ``pci_bus_id`` where the sample knows
it, ``device``, ``modelName``, ``Hostname``) beside ours (``uuid``, ``node``, ``model``, ``workload``,
``tenant``, ``parent_uuid`` on MIG instances), so NVIDIA's DCGM dashboard and ours both read it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from services.telemetry.domain.metrics import METRICS
from services.telemetry.domain.xid import XID_DESCRIPTIONS

__all__ = [
    "CONTENT_TYPE",
    "HEALTH_FAIL",
    "HEALTH_PASS",
    "LastXid",
    "render",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: DCGM's health results (dcgmHealthWatchResult_t), the values of DCGM_EXP_GPU_HEALTH_STATUS.
HEALTH_PASS, HEALTH_FAIL = 0, 20
# GpuMetrics names where they differ from the GpuSample field names METRICS uses.
_WIRE_FIELD = {"ecc_sbe_total": "ecc_sbe_count", "ecc_dbe_total": "ecc_dbe_count"}
_Row = tuple[Mapping[str, Any], str]


class LastXid:
    """The last XID code each GPU raised, which dcgm's DCGM_FI_DEV_XID_ERRORS gauge shows (0: none).

    Samples carry counts per code, not their order: the last code is the one whose count grew since
    the previous render; when several grew in between (or before the first render), the highest.
    Renders run in worker threads, so one update at a time.
    """

    def __init__(self) -> None:
        self._counts: dict[str, dict[int, int]] = {}
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()

    def update(self, counts: Mapping[str, Mapping[int, int]]) -> dict[str, int]:
        """Take this render's counts by GPU (GPUs not in it are forgotten); the last code of each."""
        with self._lock:
            return self._update(counts)

    def _update(self, counts: Mapping[str, Mapping[int, int]]) -> dict[str, int]:
        last: dict[str, int] = {}
        for gpu, now in counts.items():
            before = self._counts.get(gpu, {})
            grown = [code for code, n in now.items() if n > before.get(code, 0)]
            last[gpu] = max(grown) if grown else self._last.get(gpu, 0)
        self._counts = {gpu: dict(now) for gpu, now in counts.items()}
        self._last = last
        return last


def render(samples: Iterable[Mapping[str, Any]], *, last_xid: LastXid | None = None) -> str:
    """One family per metric (HELP, TYPE, one line per GPU that reports it).

    A lost GPU stays: its health, XID and lost series go on; the readings it no longer gives do not.
    """
    rows = [(s, _labels(s)) for s in samples]
    answering = [(s, labels) for s, labels in rows if not s.get("lost_reason")]
    lines: list[str] = []
    for spec in METRICS:
        if spec.field == "xid_total":
            values = _xid_totals(rows)
        else:
            wire = _WIRE_FIELD.get(spec.field, spec.field)
            values = [(labels, v) for s, labels in answering if (v := _value(s, wire)) is not None]
            if spec.ratio:  # dcgm-exporter's profiling fields are 0..1 where our samples carry percent
                values = [(labels, v / 100.0) for labels, v in values]
        _family(lines, spec.prometheus, spec.kind, f"{spec.help} ({spec.exposed_unit.value}).", values)
    gpus = [(s, labels) for s, labels in rows if not s.get("parent_gpu")]
    last = (last_xid or LastXid()).update({str(s["gpu"]): _codes(s) for s, _ in gpus})
    _family(
        lines,
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error the GPU raised (0: none yet).",
        [(labels, float(last[str(s["gpu"])])) for s, labels in gpus],
    )
    _family(
        lines,
        "DCGM_EXP_GPU_HEALTH_STATUS",
        "gauge",
        f"GPU health as DCGM reports it: {HEALTH_PASS} pass, {HEALTH_FAIL} fail (the GPU is lost).",
        [(f'{labels},health_watch="ALL"', _health(s)) for s, labels in gpus],
    )
    _family(
        lines,
        "gpucloud_gpu_lost",
        "gauge",
        "1 while the GPU does not answer the probe (lost), else 0.",
        [(labels, 1.0 if s.get("lost_reason") else 0.0) for s, labels in gpus],
    )
    return "\n".join(lines) + "\n"


def _family(lines: list[str], name: str, kind: str, help_text: str, values: list[tuple[str, float]]) -> None:
    if values:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{{{labels}}} {_number(v)}" for labels, v in values)


def _xid_totals(rows: list[_Row]) -> list[tuple[str, float]]:
    """Every GPU's XIDs by code, each code of the catalog born at 0, so increase() sees its first XID."""
    values: list[tuple[str, float]] = []
    catalog = XID_DESCRIPTIONS.keys()
    for sample, labels in rows:
        if sample.get("parent_gpu"):
            continue  # XIDs are the physical GPU's; a MIG instance's row would count them twice
        codes = _codes(sample)
        values.extend((f'{labels},xid="{c}"', codes.get(c, 0)) for c in sorted(codes.keys() | catalog))
    return values


def _codes(sample: Mapping[str, Any]) -> dict[int, int]:
    codes = sample.get("xid_counts")
    if not isinstance(codes, Mapping):
        return {}
    return {int(c): int(n) for c, n in codes.items() if str(c).isdigit()}


def _health(sample: Mapping[str, Any]) -> float:
    return float(HEALTH_FAIL if sample.get("lost_reason") else HEALTH_PASS)


def _value(sample: Mapping[str, Any], field: str) -> float | None:
    if field == "fb_used_pct":
        used, total = sample.get("fb_used_bytes"), sample.get("fb_total_bytes")
        return None if used is None or not total else 100.0 * used / total
    value = sample.get(field)
    return None if value is None else float(value)


def _labels(sample: Mapping[str, Any]) -> str:
    """dcgm-exporter's labels, then ours. UUID is the physical GPU's (on a MIG instance, its parent's)."""
    index, node, model = sample.get("index"), sample.get("node"), sample.get("model")
    pairs: list[tuple[str, object]] = [
        ("gpu", index),
        ("UUID", sample.get("parent_gpu") or sample.get("gpu")),
    ]
    if sample.get("pci_bus_id"):
        pairs.append(("pci_bus_id", sample["pci_bus_id"]))
    pairs += [("device", f"nvidia{index}"), ("modelName", model), ("Hostname", node)]
    pairs += [("uuid", sample.get("gpu")), ("node", node), ("model", model)]
    pairs += [("workload", sample.get("workload_id") or ""), ("tenant", sample.get("tenant_id") or "")]
    if sample.get("parent_gpu"):
        pairs.append(("parent_uuid", sample["parent_gpu"]))
    return ",".join(f'{name}="{_escape(str("" if v is None else v))}"' for name, v in pairs)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if type(value) is int:
        return str(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
