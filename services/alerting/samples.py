"""Telemetry samples as evaluation sees them: one GPU's scope labels and its numeric readings."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Protocol

from services.alerting.evaluation import Sample
from services.alerting.rules import GPU_LOST_METRIC, METRICS

__all__ = ["GpuReading", "to_sample", "to_samples"]

_FIELDS = tuple(sorted(METRICS - {"fb_used_pct"}))


class GpuReading(Protocol):
    """The fields of telemetry's GpuMetrics that evaluation reads (kept structural: no libs import)."""

    @property
    def gpu(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def workload_id(self) -> str | None: ...

    @property
    def tenant_id(self) -> str | None: ...

    @property
    def fb_used_pct(self) -> float | None: ...


def _labels(node: str, reading: GpuReading) -> dict[str, str]:
    labels = {"gpu": reading.gpu, "node": node}
    if reading.model:
        labels["model"] = reading.model
    if reading.tenant_id:
        labels["tenant"] = reading.tenant_id
    if reading.workload_id:
        labels["workload"] = reading.workload_id
    return labels


def _values(reading: GpuReading, fields: Iterable[str]) -> dict[str, float]:
    values = {name: float(v) for name in fields if (v := getattr(reading, name, None)) is not None}
    pct = reading.fb_used_pct
    if pct is not None:
        values["fb_used_pct"] = pct
    # A GPU that reports is not lost: this resolves a GpuLost alert raised by a fault signal.
    values[GPU_LOST_METRIC] = 0.0
    return values


def to_sample(*, node: str, reading: GpuReading, fields: Iterable[str] = _FIELDS) -> Sample:
    """One GPU reading as a Sample (built without re-validation: it is on the hot path)."""
    return Sample.model_construct(labels=_labels(node, reading), values=_values(reading, fields))


def to_samples(
    *, node: str, readings: Iterable[GpuReading], fields: Collection[str] | None = None
) -> list[Sample]:
    """Every reading of one node's batch; `fields` limits the values to those the rules read."""
    wanted = _FIELDS if fields is None else tuple(f for f in _FIELDS if f in fields)
    return [to_sample(node=node, reading=r, fields=wanted) for r in readings]
