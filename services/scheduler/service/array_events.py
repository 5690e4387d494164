"""A job array's outbox rows (WorkloadSubmittedV1, then WorkloadQueuedV1, for each item in order), written
from templates instead of a model per event: 20,000 envelopes through pydantic, or even through
``json.dumps`` one by one, cost more than the rest of the array.

Only values that need escaping (tenant, source, traceparent, tags, resources) go through ``json``, once
each; ids, numbers and fixed words are written as JSON writes them. The rows decode to the same envelopes
and payloads that ``outbox_row`` of the event models gives (a unit test holds them to it), so consumers
cannot tell the two apart.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from libs.common.db.uow import OutboxRow
from libs.common.events import topic_of
from libs.common.events.scheduler import WorkloadQueuedV1, WorkloadSubmittedV1
from services.scheduler.domain.creation import CreationSpec
from services.scheduler.domain.stored import StoredArray

__all__ = ["array_outbox", "to_json"]

_SUBMITTED, _QUEUED = WorkloadSubmittedV1.event_type(), WorkloadQueuedV1.event_type()
_TOPIC = topic_of(WorkloadSubmittedV1)
_BOOL = {True: "true", False: "false"}
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def to_json(value: Any) -> str:
    """Compact JSON, as pydantic writes it."""
    return _ENCODER.encode(value)


def _event_ids(count: int) -> Iterator[str]:
    """``count`` random (version 4) UUIDs as text, from one read of the system's randomness: uuid4() reads
    it once per id, and 20,000 reads cost more than the rest of writing the ids."""
    random = os.urandom(16 * count).hex()
    for i in range(0, 32 * count, 32):
        h = random[i : i + 32]
        variant = "89ab"[int(h[16], 16) & 3]
        yield f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}"


def array_outbox(
    array: StoredArray,
    *,
    specs: Sequence[CreationSpec],
    tags: Sequence[str],
    resources: Sequence[dict[str, str | int]],
    source: str,
    traceparent: str | None,
    time: datetime,
) -> list[OutboxRow]:
    """Both events of every item, as the single submission writes them, in item order; ``tags`` are the
    items' tags as JSON (``to_json``)."""
    # The head is a %-template: what is written into it verbatim has its own % doubled.
    tenant, stamp = _literal(to_json(array.tenant_id)), time.isoformat().replace("+00:00", "Z")
    origin, trace = _literal(to_json(f"/gpucloud/{source}")), _literal(to_json(traceparent))
    head = f'{{"specversion":"1.0","id":"%s","source":{origin},"type":"%s",'
    head += f'"time":"{stamp}","subject":"%s","tenant":{tenant},"traceparent":{trace},'
    head += '"datacontenttype":"application/json","data":{"type":"%s","workload_id":"%s",'
    head += f'"tenant_id":{tenant},'
    rows: list[OutboxRow] = []
    ids = _event_ids(2 * len(specs))
    known: dict[tuple[tuple[str, str | int], ...], str] = {}
    for i, (wid, spec, prio) in enumerate(zip(array.workload_ids, specs, array.priorities, strict=True)):
        pricing = "spot" if spec.preemptible else "on_demand"
        submitted = (
            f'"kind":"{spec.kind.value}","urgency":{spec.urgency!r},"preemptible":{_BOOL[spec.preemptible]},'
            f'"pricing_class":"{pricing}","tags":{tags[i]},"resources":{_resources(resources[i], known)}}}}}'
        )
        queued = f'"position":{array.first_position + i},"priority":{prio!r},"estimated_start":null}}}}'
        for kind, data in ((_SUBMITTED, submitted), (_QUEUED, queued)):
            event_id = next(ids)
            payload = head % (event_id, kind, wid, kind, wid) + data
            rows.append((event_id, _TOPIC, wid, payload.encode(), traceparent))
    return rows


def _literal(text: str) -> str:
    """Text to stand for itself in a %-template."""
    return text.replace("%", "%%")


def _resources(resources: dict[str, str | int], known: dict[tuple[tuple[str, str | int], ...], str]) -> str:
    """The resources as JSON, written once for all the items asking the same."""
    key = tuple(resources.items())
    found = known.get(key)
    if found is None:
        found = known[key] = to_json(resources)
    return found
