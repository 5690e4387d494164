"""A workload's log and outputs as the node agent left them in the object store (keys.py's layout).

A workload's log is its placements' chunks, placements in the order of their first chunk's time and
chunks in ``seq`` order within one; ``since`` keeps the chunks the agent read at or after a time (a
chunk is the granularity: its lines carry no time of their own). Its outputs are those of its last
placement with a manifest (the manifest is written last, so one that exists is complete).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from libs.common.objectstore import ObjectInfo, ObjectNotFound, ObjectStore, ObjectStoreError
from libs.common.objectstore.keys import log_prefix, output_file, output_prefix, parse_log_chunk
from services.scheduler.domain.model import TERMINAL_STATES
from services.scheduler.domain.stored import StoredWorkload

__all__ = [
    "MAX_LOG_BYTES",
    "LogChunk",
    "LogEvent",
    "LogIndex",
    "LogText",
    "Manifest",
    "WorkloadReader",
    "follow_log",
    "latest_manifest",
    "log_index",
    "output_object",
    "read_log",
    "stream_object",
]

#: The most a log answer carries; a longer log keeps its end (whole lines) and says it was cut.
MAX_LOG_BYTES = 8 * 1024 * 1024
_END = "end.json"
_MANIFEST = "manifest.json"
_TERMINAL = frozenset(s.value for s in TERMINAL_STATES)
log = logging.getLogger(__name__)


class WorkloadReader(Protocol):
    """Reads one workload as a tenant may see it (the workload store answers this)."""

    async def workload(self, workload_id: str, *, tenant: str | None = None) -> StoredWorkload | None: ...


@dataclass(frozen=True, slots=True)
class LogChunk:
    """One shipped piece of a placement's output."""

    key: str
    placement_id: str
    seq: int
    unix_ms: int
    size: int


@dataclass(frozen=True, slots=True)
class LogIndex:
    """A workload's log chunks in log order, and the placements whose log is complete (end.json)."""

    chunks: tuple[LogChunk, ...]
    ended: frozenset[str]

    @property
    def placements(self) -> frozenset[str]:
        """Every placement the store holds log objects of."""
        return frozenset(c.placement_id for c in self.chunks) | self.ended

    def since(self, unix_ms: int | None) -> tuple[LogChunk, ...]:
        """The chunks read at or after ``unix_ms`` (all for None)."""
        return self.chunks if unix_ms is None else tuple(c for c in self.chunks if c.unix_ms >= unix_ms)


@dataclass(frozen=True, slots=True)
class LogText:
    """Log bytes, and how many bytes of the asked part the size cap left out (0: none)."""

    data: bytes
    omitted_bytes: int = 0


@dataclass(frozen=True, slots=True)
class LogEvent:
    """What a follower sends: log bytes (``id`` = placement/seq of the chunk) or the end."""

    kind: Literal["log", "end"]
    data: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Manifest:
    """A placement's output manifest, as the agent wrote it."""

    placement_id: str
    body: dict[str, Any]

    def file_paths(self) -> frozenset[str]:
        """The paths the manifest lists (dropped files are not among them)."""
        files = self.body.get("files")
        if not isinstance(files, list):
            return frozenset()
        return frozenset(f["path"] for f in files if isinstance(f, dict) and isinstance(f.get("path"), str))


def _ordered(chunks: Sequence[LogChunk]) -> tuple[LogChunk, ...]:
    first: dict[str, int] = {}
    for c in chunks:
        first[c.placement_id] = min(first.get(c.placement_id, c.unix_ms), c.unix_ms)
    return tuple(sorted(chunks, key=lambda c: (first[c.placement_id], c.placement_id, c.seq)))


async def log_index(store: ObjectStore, workload_id: str, *, placement: str | None = None) -> LogIndex:
    """What the store holds of a workload's log (one placement's, when given)."""
    chunks: list[LogChunk] = []
    ended: set[str] = set()
    for info in await store.list(log_prefix(workload_id, placement)):
        parsed = parse_log_chunk(info.key)
        if parsed is not None and parsed.workload_id == workload_id:
            chunks.append(LogChunk(info.key, parsed.placement_id, parsed.seq, parsed.unix_ms, info.size))
        elif info.key.endswith("/" + _END) and info.key.count("/") == 3:
            ended.add(info.key.split("/")[2])
    return LogIndex(chunks=_ordered(chunks), ended=frozenset(ended))


def _last_lines(data: bytes, lines: int) -> bytes:
    return b"".join(data.splitlines(keepends=True)[-lines:]) if lines > 0 else b""


def _capped(data: bytes, *, max_bytes: int) -> LogText:
    if len(data) <= max_bytes:
        return LogText(data)
    kept = data[-max_bytes:]
    newline = kept.find(b"\n")
    if 0 <= newline < len(kept) - 1:
        kept = kept[newline + 1 :]  # start at a whole line
    return LogText(kept, omitted_bytes=len(data) - len(kept))


async def read_log(
    store: ObjectStore, chunks: Sequence[LogChunk], *, tail: int | None = None, max_bytes: int = MAX_LOG_BYTES
) -> LogText:
    """The chunks' bytes joined, their last ``tail`` lines, at most ``max_bytes`` (the end kept).

    Chunks are read from the last one back and only as far as the answer needs.
    """
    parts: list[bytes] = []
    held = newlines = skipped = 0
    for i in range(len(chunks) - 1, -1, -1):
        if held > max_bytes or (tail is not None and newlines > tail):
            skipped = sum(c.size for c in chunks[: i + 1])
            break
        try:
            piece = await store.get(chunks[i].key)
        except ObjectNotFound:
            continue  # retention took it between the listing and now
        parts.append(piece)
        held += len(piece)
        newlines += piece.count(b"\n")
    data = b"".join(reversed(parts))
    if tail is not None:
        return _capped(_last_lines(data, tail), max_bytes=max_bytes)
    text = _capped(data, max_bytes=max_bytes)
    return LogText(text.data, text.omitted_bytes + skipped) if text.omitted_bytes or skipped else text


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _ended(w: StoredWorkload | None) -> bool:
    return w is None or w.state in _TERMINAL


def _resumed(chunks: Sequence[LogChunk], after: str) -> set[str]:
    """The keys of the chunks a follower that last got ``after`` (placement/seq) already has."""
    placement, _, seq = after.rpartition("/")
    if not seq.isdigit():
        return set()
    got = [i for i, c in enumerate(chunks) if c.placement_id == placement and c.seq <= int(seq)]
    return {c.key for c in chunks[: got[-1] + 1]} if got else set()


async def _first_events(
    store: ObjectStore, index: LogIndex, *, since_ms: int | None, tail: int | None, after: str | None
) -> tuple[list[LogEvent], set[str]]:
    if after is not None:
        return [], _resumed(index.chunks, after)
    first = await read_log(store, index.since(since_ms), tail=tail)
    sent = {c.key for c in index.chunks}
    if not first.data:
        return [], sent
    last = index.chunks[-1]
    return [LogEvent("log", _decoded(first.data), f"{last.placement_id}/{last.seq}")], sent


async def follow_log(
    store: ObjectStore,
    reader: WorkloadReader,
    *,
    workload_id: str,
    tenant: str | None,
    placement: str | None = None,
    since_ms: int | None = None,
    tail: int | None = None,
    last_event_id: str | None = None,
    poll_s: float = 0.5,
    end_grace_s: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[LogEvent]:
    """The log so far, then each chunk as it appears, then one end event.

    The end comes once the workload ended and every placement's log is complete (its end.json), or one
    placement's when ``placement`` is given; a workload ended for ``end_grace_s`` whose log never
    completed (an agent that does not ship) ends ``{"complete": false}``. The workload is read before
    the listing: the agent completes a placement's log before it reports the exit, so a listing made
    after an ended workload was read holds the whole log. ``last_event_id`` (a reconnecting client's
    Last-Event-ID, placement/seq) resumes after that chunk, each later chunk an event of its own. A
    poll that fails (the store or the database unreachable) is logged and retried at the next.
    """
    index = await log_index(store, workload_id, placement=placement)
    events, sent = await _first_events(store, index, since_ms=since_ms, tail=tail, after=last_event_id)
    for event in events:
        yield event
    ended_at: float | None = None
    while True:
        try:
            done = _ended(await reader.workload(workload_id, tenant=tenant))
            index = await log_index(store, workload_id, placement=placement)
            new = [c for c in index.chunks if c.key not in sent]
            for chunk in new:
                try:
                    data = await store.get(chunk.key)
                except ObjectNotFound:
                    data = None
                sent.add(chunk.key)
                if data is not None:
                    yield LogEvent("log", _decoded(data), f"{chunk.placement_id}/{chunk.seq}")
        except Exception:  # a transient failure must not break the client's stream
            log.warning("following the log of %s: a poll failed; retrying", workload_id, exc_info=True)
            await asyncio.sleep(poll_s)
            continue
        complete = index.placements <= index.ended
        if (placement is not None and placement in index.ended) or (done and complete):
            yield LogEvent("end", json.dumps({"complete": True}))
            return
        if done:
            ended_at = clock() if ended_at is None else ended_at
            if clock() - ended_at >= end_grace_s:
                yield LogEvent("end", json.dumps({"complete": False}))
                return
        await asyncio.sleep(poll_s)


async def latest_manifest(store: ObjectStore, workload_id: str) -> Manifest | None:
    """The manifest of the workload's last placement that has one (by when it was written), or None."""
    manifests = [
        i
        for i in await store.list(output_prefix(workload_id))
        if i.key.count("/") == 3 and i.key.endswith("/" + _MANIFEST)
    ]
    for info in sorted(manifests, key=lambda i: (i.last_modified, i.key), reverse=True):
        try:
            body = json.loads(await store.get(info.key))
        except ObjectNotFound:
            continue
        except ValueError as exc:
            raise ObjectStoreError(f"{info.key} is not a JSON manifest: {exc}") from exc
        if isinstance(body, dict):
            return Manifest(placement_id=info.key.split("/")[2], body=body)
    return None


async def output_object(
    store: ObjectStore, workload_id: str, manifest: Manifest, path: str
) -> ObjectInfo | None:
    """The stored file at ``path`` of the manifest's placement; None when the manifest does not list it.

    Raises ValueError for a path that could leave the placement's files (``..``, ``//``, absolute).
    """
    key = output_file(workload_id, manifest.placement_id, path)
    if path not in manifest.file_paths():
        return None
    try:
        return await store.head(key)
    except ObjectNotFound:
        return None


async def stream_object(
    store: ObjectStore, info: ObjectInfo, *, piece: int = 1024 * 1024
) -> AsyncIterator[bytes]:
    """An object's bytes in pieces of at most ``piece`` (ranged reads, so a large file is never held)."""
    for start in range(0, info.size, piece):
        data = await store.get_range(info.key, start=start, end=min(start + piece, info.size))
        if not data:
            return
        yield data
