"""Telemetry samples as evaluation sees them: one GPU's scope labels and its numeric readings.

A reading is one GpuMetrics entry of a SampleBatchV1 as a plain JSON dict (the evaluator decodes
batches with `json`, not pydantic: at 10,000 GPUs a second the models cost more than evaluation),
with `fb_used_pct` filled in by `derive`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from services.alerting.domain.rules import GPU_LOST_METRIC, METRICS, XID_CODES, XID_LABEL, XID_METRIC
from services.alerting.domain.series_evaluation import Sample

__all__ = [
    "Reading",
    "derive",
    "identity",
    "reading_fields",
    "reading_labels",
    "to_sample",
    "value_fields",
    "xid_readings",
]

Reading = Mapping[str, Any]

_FIELDS = tuple(sorted(METRICS - {"fb_used_pct"}))


def derive(reading: dict[str, Any]) -> dict[str, Any]:
    """Set the derived `fb_used_pct` (GpuMetrics' property) in place; returns the reading."""
    used, total = reading.get("fb_used_bytes"), reading.get("fb_total_bytes")
    if used is None or not total:
        reading.pop("fb_used_pct", None)
    else:
        reading["fb_used_pct"] = 100.0 * used / total
    return reading


def identity(node: str, reading: Reading) -> tuple[str, str, str, str | None, str | None, str | None]:
    """What identifies the reading's series: the values its labels are made of (cheap to hash)."""
    return (
        node,
        reading["gpu"],
        reading.get("model") or "",
        reading.get("tenant_id"),
        reading.get("workload_id"),
        reading.get(XID_LABEL),
    )


def xid_readings(readings: Iterable[Reading]) -> list[dict[str, Any]]:
    """One reading per GPU and XID code, for the rules that match on `xid`: the catalog's codes at 0
    until raised (so increase() sees a code's first XID), and any other code the GPU raised. A reading
    without xid_count (a MIG instance: its XIDs are the parent's) has none."""
    out: list[dict[str, Any]] = []
    for reading in readings:
        if reading.get(XID_METRIC) is None:
            continue
        raised = {int(code): count for code, count in (reading.get("xid_counts") or {}).items()}
        scope = {k: reading[k] for k in ("gpu", "model", "tenant_id", "workload_id") if k in reading}
        for code in sorted(raised.keys() | set(XID_CODES)):
            out.append({**scope, XID_LABEL: str(code), XID_METRIC: raised.get(code, 0)})
    return out


def reading_labels(node: str, reading: Reading) -> dict[str, str]:
    """The series labels of one reading (empty scope values are left out)."""
    labels = {"gpu": reading["gpu"], "node": node}
    if model := reading.get("model"):
        labels["model"] = model
    if tenant := reading.get("tenant_id"):
        labels["tenant"] = tenant
    if workload := reading.get("workload_id"):
        labels["workload"] = workload
    if xid := reading.get(XID_LABEL):
        labels[XID_LABEL] = xid
    return labels


def reading_fields(metrics: Collection[str]) -> tuple[str, ...]:
    """The wire fields that the metrics `metrics` are read from (fb_used_pct from the two fb fields)."""
    fields = {f for f in _FIELDS if f in metrics}
    if "fb_used_pct" in metrics:
        fields |= {"fb_used_bytes", "fb_total_bytes"}
    return tuple(sorted(fields))


def value_fields(metrics: Collection[str]) -> tuple[str, ...]:
    """The plain (not derived) metrics among `metrics`, in a fixed order: what `to_sample` copies."""
    return tuple(f for f in _FIELDS if f in metrics)


def to_sample(*, labels: dict[str, str], reading: Reading, fields: tuple[str, ...] = _FIELDS) -> Sample:
    """One reading as a Sample of the `fields` (see `value_fields`) rules read (built without validation)."""
    values = {name: float(v) for name in fields if (v := reading.get(name)) is not None}
    pct = reading.get("fb_used_pct")
    if pct is not None:
        values["fb_used_pct"] = pct
    # A GPU that reports is not lost: this resolves a GpuLost alert raised by a fault signal. A reading
    # the agent marks lost (it could not read the GPU) keeps the alert firing while the GPU stays lost.
    values[GPU_LOST_METRIC] = 1.0 if reading.get("lost_reason") else 0.0
    return Sample.model_construct(labels=labels, values=values)
