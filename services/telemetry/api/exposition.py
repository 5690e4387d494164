"""Prometheus text exposition of every GPU, in dcgm-exporter's names, with allocation labels."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from services.telemetry.domain.metrics import METRICS

__all__ = ["CONTENT_TYPE", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# GpuMetrics names where they differ from the GpuSample field names METRICS uses.
_WIRE_FIELD = {"ecc_sbe_total": "ecc_sbe_count", "ecc_dbe_total": "ecc_dbe_count"}
_LABELS = (("gpu", "index"), ("uuid", "gpu"), ("node", "node"), ("model", "model"))


def render(samples: Iterable[Mapping[str, Any]]) -> str:
    """One family per metric (HELP, TYPE, one line per GPU that reports it); lost GPUs export nothing."""
    rows = [(s, _labels(s)) for s in samples if not s.get("lost_reason")]
    lines: list[str] = []
    for spec in METRICS:
        if spec.field == "xid_total":
            values = _xid_values(rows)
        else:
            wire = _WIRE_FIELD.get(spec.field, spec.field)
            values = [(labels, v) for s, labels in rows if (v := _value(s, wire)) is not None]
        if not values:
            continue
        lines.append(f"# HELP {spec.prometheus} {spec.help} ({spec.unit.value}).")
        lines.append(f"# TYPE {spec.prometheus} {spec.kind}")
        lines.extend(f"{spec.prometheus}{{{labels}}} {_number(v)}" for labels, v in values)
    return "\n".join(lines) + "\n"


def _xid_values(rows: list[tuple[Mapping[str, Any], str]]) -> list[tuple[str, float]]:
    """XID errors labelled by xid, as dcgm-exporter does: one series per code a GPU raised. A GPU that
    raised none (or whose agent sends only the total) has one series without the label, so the
    family still sums to the fleet's XIDs and a quiet GPU is exported at 0."""
    values: list[tuple[str, float]] = []
    for sample, labels in rows:
        codes = sample.get("xid_counts")
        if isinstance(codes, Mapping) and codes:
            by_code = sorted((int(c), n) for c, n in codes.items() if str(c).isdigit())
            values.extend((f'{labels},xid="{code}"', float(n)) for code, n in by_code)
        elif (total := sample.get("xid_count")) is not None:
            values.append((labels, float(total)))
    return values


def _value(sample: Mapping[str, Any], field: str) -> float | None:
    if field == "fb_used_pct":
        used, total = sample.get("fb_used_bytes"), sample.get("fb_total_bytes")
        return None if used is None or not total else 100.0 * used / total
    value = sample.get(field)
    return None if value is None else float(value)


def _labels(sample: Mapping[str, Any]) -> str:
    pairs = [(name, sample.get(key)) for name, key in _LABELS]
    pairs += [("workload", sample.get("workload_id") or ""), ("tenant", sample.get("tenant_id") or "")]
    if sample.get("parent_gpu"):
        pairs.append(("parent_uuid", sample["parent_gpu"]))
    return ",".join(f'{name}="{_escape(str("" if v is None else v))}"' for name, v in pairs)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
