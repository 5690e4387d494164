"""The sample hot path's codec: SampleBatchV1 envelopes built and read as plain JSON.

At 10,000 GPUs a second, pydantic validation on both ends costs more CPU than everything else
together. These functions write and read exactly the CloudEvents envelope libs.common.events
defines (a unit test checks both against the models); every other event keeps the normal codec.

Each reader of ``telemetry.samples`` asks for the checks it needs: telemetry's ingest reads loosely
(a sample needs a gpu, the rest is stored as it came); a reader that computes with the values asks
for ``FieldChecks``, which accept only batches the models would accept unchanged and leave anything
else (coercions, invalid records) to ``decode_sample_batch_models``.
"""

from __future__ import annotations

import json
import json.scanner
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from libs.common.events.envelope import EventDecodeError, decode
from libs.common.events.registry import EVENT_TYPES
from libs.common.events.telemetry import SampleBatchV1

__all__ = [
    "INT_FIELDS",
    "METRIC_FIELDS",
    "SAMPLE_BATCH_TYPE",
    "FieldChecks",
    "SampleEncoder",
    "WireBatch",
    "decode_sample_batch",
    "decode_sample_batch_models",
    "encode_sample_batch",
]

#: The envelope (and payload) type of a sample batch.
SAMPLE_BATCH_TYPE = SampleBatchV1.event_type()
#: The metric fields of a GPU's sample in the order the agent writes them, after gpu, index, model,
#: xid_count, xid_counts (when it raised any) and (when allocated) workload_id, tenant_id. A values
#: row is (gpu, index, *these). New fields go last and are optional: a row may end in None for them
#: (left out, as the dict path leaves None out), and samples of agents written before them lack them.
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
    "tensor_active_pct",  # None where the GPU has no GPM (before Hopper) and on the first sample
)
#: GpuMetrics' integer metrics (the other metric fields are floats): on the wire an int field never
#: carries a fraction, a float field may be written as either JSON number.
INT_FIELDS = frozenset(
    {"fb_used_bytes", "fb_total_bytes", "ecc_sbe_count", "ecc_dbe_count", "xid_count", "throttle_reasons"}
)
_INT: tuple[type, ...] = (int,)
_NUMBER: tuple[type, ...] = (int, float)
# repr() of an int or a finite float is exactly what json writes for it.
_METRICS = frozenset(METRIC_FIELDS)
_METRICS_TEMPLATE = "".join(f',"{name}":%r' for name in METRIC_FIELDS) + "}"
_WITHOUT_LAST_TEMPLATE = "".join(f',"{name}":%r' for name in METRIC_FIELDS[:-1]) + "}"
_dumps = json.JSONEncoder(separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class FieldChecks:
    """A strict read: the exact JSON types ``types`` gives a sample's fields (when present, not null).

    Beyond them every strict read checks what identifies a sample (gpu, index, model, tenant and
    workload ids) and the batch (node, a time with its zone); a batch failing any check is not read.
    """

    types: tuple[tuple[str, tuple[type, ...]], ...] = ()

    @classmethod
    def of_metrics(cls, fields: Iterable[str]) -> FieldChecks:
        """The checks of the GpuMetrics metric ``fields`` a reader computes with (others are ignored)."""
        return cls(
            types=tuple(
                (f, _INT if f in INT_FIELDS else _NUMBER) for f in fields if f in _METRICS or f in INT_FIELDS
            )
        )


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
    simulator reads them, the last one possibly None) is written from a template; a sample dict goes
    through json. Both give the bytes json.dumps gives for the same dict (a unit test holds them to it).
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
        # The last field is optional (a GPU without GPM has no tensor activity): left out when None.
        metrics = _METRICS_TEMPLATE % row[2:] if row[-1] is not None else _WITHOUT_LAST_TEMPLATE % row[2:-1]
        if allocation is None:
            return head + counts + metrics
        labels = self._labels.get(allocation)
        if labels is None:
            workload, tenant = allocation
            labels = self._labels[allocation] = (
                f',"workload_id":{_dumps(workload)},"tenant_id":{_dumps(tenant)}'
            )
        return head + counts + labels + metrics

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


def decode_sample_batch(
    raw: bytes, *, checks: FieldChecks | None = None, keep_texts: bool = True
) -> WireBatch | None:
    """A sample batch, or None for any other event type.

    Without ``checks`` (loose): EventDecodeError when it is not a valid batch. With ``checks``
    (strict): also None for anything the checks refuse or that is invalid; let the models judge it
    (``decode_sample_batch_models``). ``keep_texts``: keep each sample's JSON text where the layout
    allows (see WireBatch).
    """
    try:
        envelope, texts = _parse(raw, keep_texts=keep_texts)
        if envelope.get("type") != SAMPLE_BATCH_TYPE:
            return None
        if checks is None:
            return _loose(envelope["data"], texts)
        return _strict(envelope["data"], texts, checks)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if checks is not None:
            return None
        if isinstance(exc, EventDecodeError):
            raise
        raise EventDecodeError(f"not a valid sample batch: {exc!r}") from exc


class _SampleEnvelope(BaseModel):
    """The envelope with its payload typed, so a sample batch is parsed in one pass."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["telemetry.samples.batch.v1"]
    data: SampleBatchV1


def decode_sample_batch_models(raw: bytes) -> WireBatch | None:
    """A sample batch read through the models (coercing as they do; samples are their model_dump()).

    None for another event type; EventDecodeError (saying why) when it is not a valid event.
    """
    try:
        batch: SampleBatchV1 | None = _SampleEnvelope.model_validate_json(raw).data
    except ValidationError:
        _, payload = decode(raw, EVENT_TYPES)  # another event type, or the general decoder says why
        batch = payload if isinstance(payload, SampleBatchV1) else None
    if batch is None:
        return None
    return WireBatch(node=batch.node, at=batch.at, samples=[s.model_dump() for s in batch.samples])


def _parse(raw: bytes, *, keep_texts: bool) -> tuple[Any, list[str] | None]:
    if not keep_texts:
        return json.loads(raw), None
    text = raw.decode()
    split = _split(text)
    return split if split is not None else (json.loads(text), None)


def _loose(data: Any, texts: list[str] | None) -> WireBatch:
    samples = data["samples"]
    if not isinstance(samples, list):
        raise EventDecodeError("sample batch: samples is not a list")
    for sample in samples:
        if not isinstance(sample, dict) or "gpu" not in sample:
            raise EventDecodeError("sample batch: every sample needs a gpu")
    at = datetime.fromisoformat(data["at"])
    return WireBatch(node=str(data["node"]), at=at, samples=samples, texts=texts)


def _strict(data: Any, texts: list[str] | None, checks: FieldChecks) -> WireBatch | None:
    node, samples = data["node"], data["samples"]
    if data.get("type", SAMPLE_BATCH_TYPE) != SAMPLE_BATCH_TYPE or type(node) is not str:
        return None
    at = datetime.fromisoformat(data["at"])
    if at.tzinfo is None or type(samples) is not list:
        return None
    for sample in samples:
        if not _plain_sample(sample, checks.types):
            return None
    return WireBatch(node=node, at=at, samples=samples, texts=texts)


def _plain_sample(sample: dict[str, Any], types: tuple[tuple[str, tuple[type, ...]], ...]) -> bool:
    """Whether the models would take the sample's checked fields as they are."""
    if type(sample["gpu"]) is not str or type(sample["index"]) is not int:
        return False
    tenant, workload = sample.get("tenant_id"), sample.get("workload_id")
    if type(sample.get("model", "")) is not str or (
        (tenant is not None and type(tenant) is not str)
        or (workload is not None and type(workload) is not str)
    ):
        return False
    for name, kinds in types:
        value = sample.get(name)
        if value is not None and value.__class__ not in kinds:
            return False
    return True


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
