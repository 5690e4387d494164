"""The sample hot path's codec: SampleBatchV1 envelopes built and read as plain JSON.

At 10,000 GPUs a second, pydantic validation on both ends costs more CPU than everything else
together. These functions write and read exactly the CloudEvents envelope libs.common.events
defines (a unit test checks both against the models); every other event keeps the normal codec.
"""

from __future__ import annotations

import json
import json.scanner
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from libs.common.events import EventDecodeError
from libs.common.events.telemetry import SampleBatchV1

__all__ = ["METRIC_FIELDS", "SampleEncoder", "WireBatch", "decode_sample_batch", "encode_sample_batch"]

SAMPLE_BATCH_TYPE = SampleBatchV1.event_type()
#: The metric fields of a GPU's sample in the order the agent writes them, after gpu, index, model,
#: xid_count, xid_counts (when it raised any) and (when allocated) workload_id, tenant_id. A values
#: row is (gpu, index, *these).
METRIC_FIELDS: tuple[str, ...] = (
    "sm_util_pct",
    "mem_util_pct",
    "fb_used_bytes",
    "fb_total_bytes",
    "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s",
    "gpu_temp_c",
    "mem_temp_c",
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "ecc_sbe_count",
    "ecc_dbe_count",
    "throttle_reasons",
)
# repr() of an int or a finite float is exactly what json writes for it.
_METRICS_TEMPLATE = "".join(f',"{name}":%r' for name in METRIC_FIELDS) + "}"
_dumps = json.JSONEncoder(separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class WireBatch:
    """A decoded SampleBatchV1: samples stay dicts of GpuMetrics fields.

    texts, where the layout allowed (no whitespace inside the samples array, as this module writes
    it), holds each sample's exact JSON text, so the aggregator can store it without re-encoding.
    """

    node: str
    at: datetime
    samples: list[dict[str, Any]]
    texts: list[str] | None = None


def encode_sample_batch(*, node: str, at: datetime, samples: list[dict[str, Any]], source: str) -> bytes:
    """The envelope JSON of a SampleBatchV1 whose samples are GpuMetrics field dicts (None left out)."""
    return _envelope(
        node=_dumps(node), stamp=at.isoformat(), samples=[_dumps(s) for s in samples], source=source
    )


class SampleEncoder:
    """encode_sample_batch for one agent, with what never changes about a GPU's sample encoded once.

    A sample given as a values row (gpu, index, *METRIC_FIELDS values: ints and finite floats, as the
    simulator reads them) is written from a template; a sample dict goes through json. Both give the
    bytes json.dumps gives for the same dict (a unit test holds them to it).
    """

    def __init__(self, *, source: str) -> None:
        self._source = source
        self._heads: dict[tuple[str, int, str], str] = {}
        self._labels: dict[tuple[str, str], str] = {}
        self._nodes: dict[str, str] = {}

    def row(
        self,
        row: tuple[Any, ...],
        *,
        model: str,
        xid_count: int,
        allocation: tuple[str, str] | None,
        xid_counts: dict[int, int] | None = None,
    ) -> str:
        """One sample from a values row, labelled as sample_dicts labels it."""
        key = (row[0], row[1], model)
        head = self._heads.get(key)
        if head is None:
            head = self._heads[key] = (
                f'{{"gpu":{_dumps(row[0])},"index":{row[1]!r},"model":{_dumps(model)},"xid_count":'
            )
        counts = repr(xid_count)
        if xid_counts:  # rare: only GPUs that raised an XID
            counts += f',"xid_counts":{_dumps(xid_counts)}'
        if allocation is None:
            return head + counts + _METRICS_TEMPLATE % row[2:]
        labels = self._labels.get(allocation)
        if labels is None:
            workload, tenant = allocation
            labels = self._labels[allocation] = (
                f',"workload_id":{_dumps(workload)},"tenant_id":{_dumps(tenant)}'
            )
        return head + counts + labels + _METRICS_TEMPLATE % row[2:]

    @staticmethod
    def sample(sample: dict[str, Any]) -> str:
        """One sample from a GpuMetrics field dict."""
        return _dumps(sample)

    def batch(self, *, node: str, stamp: str, samples: list[str]) -> bytes:
        """The envelope around samples encoded by row() or sample(); stamp is the tick's isoformat()."""
        quoted = self._nodes.get(node)
        if quoted is None:
            quoted = self._nodes[node] = _dumps(node)
        return _envelope(node=quoted, stamp=stamp, samples=samples, source=self._source)


def _envelope(*, node: str, stamp: str, samples: list[str], source: str) -> bytes:
    """json.dumps(envelope, separators=(",", ":")) of a SampleBatchV1, samples already encoded."""
    return (
        f'{{"specversion":"1.0","id":"{uuid.uuid4()}","source":{_dumps(source)},"type":"{SAMPLE_BATCH_TYPE}",'
        f'"time":"{stamp}","subject":{node},"datacontenttype":"application/json","data":{{"type":'
        f'"{SAMPLE_BATCH_TYPE}","node":{node},"at":"{stamp}","samples":[{",".join(samples)}]}}}}'
    ).encode()


def decode_sample_batch(raw: bytes) -> WireBatch | None:
    """A sample batch, None for any other event type; EventDecodeError when it is not a valid batch."""
    try:
        text = raw.decode()
        split = _split(text)
        envelope, texts = split if split is not None else (json.loads(text), None)
        if envelope.get("type") != SAMPLE_BATCH_TYPE:
            return None
        data = envelope["data"]
        samples = data["samples"]
        if not isinstance(samples, list):
            raise EventDecodeError("sample batch: samples is not a list")
        for sample in samples:
            if not isinstance(sample, dict) or "gpu" not in sample:
                raise EventDecodeError("sample batch: every sample needs a gpu")
        at = datetime.fromisoformat(data["at"])
        return WireBatch(node=str(data["node"]), at=at, samples=samples, texts=texts)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, EventDecodeError):
            raise
        raise EventDecodeError(f"not a valid sample batch: {exc!r}") from exc


_SAMPLES_KEY = '"samples":['
_SENTINEL = f"samples-{uuid.uuid4()}"  # per process: no producer can plant it in a batch
_scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed: any decoder


def _split(text: str) -> tuple[dict[str, Any], list[str]] | None:
    """The envelope and each sample's JSON text in one pass, or None when the layout is not ours.

    The samples array is cut out and replaced by a sentinel; the rest (small) is parsed and must hold
    the sentinel at data.samples, which proves the cut-out array is that field. Its elements are then
    scanned one by one, keeping each one's text. Anything unexpected falls back to json.loads.
    """
    cut = text.find(_SAMPLES_KEY)  # our layout: data.samples is the first such key
    if cut < 0 or not text.endswith("]}}"):
        return None
    try:
        envelope = json.loads(f'{text[:cut]}"samples":"{_SENTINEL}"}}}}')
        if not isinstance(envelope, dict) or envelope.get("data", {}).get("samples") != _SENTINEL:
            return None
        samples: list[Any] = []
        texts: list[str] = []
        pos, end = cut + len(_SAMPLES_KEY), len(text) - 3  # end: where the closing "]}}" starts
        while pos < end:
            sample, stop = _scan(text, pos)
            samples.append(sample)
            texts.append(text[pos:stop])
            if stop == end:
                break
            if text[stop] != "," or stop + 1 == end:
                return None
            pos = stop + 1
        else:
            if pos != end:
                return None
    except (ValueError, StopIteration, AttributeError):
        return None
    envelope["data"]["samples"] = samples
    return envelope, texts
