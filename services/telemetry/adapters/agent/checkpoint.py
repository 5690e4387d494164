"""The agent's local checkpoint: the scheduler records of the workloads it holds, and where it read to.

Replaying the whole `scheduler.workloads` topic at every start grows with the cluster's history. The
book only depends on the records of the workloads it still holds: one it does not hold is exactly as if
none of its records had been applied (PlacementBook.holds), and applying is idempotent and deterministic
(the runner starts with each record's event time). So re-applying the kept records, in the order they
were consumed, then reading on from the saved positions rebuilds the same book as a full replay.

The file is JSON (raw records in base64), written to a temporary file in the same directory, fsynced
and renamed over the old one, so a crash leaves the old checkpoint or the new one, never a partial one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from libs.common.events import Event
from libs.common.events.scheduler import WorkloadEndedV1, WorkloadMigratingV1, WorkloadPlacedV1

__all__ = [
    "FILE_NAME",
    "VERSION",
    "Checkpoint",
    "CheckpointRefused",
    "KeptRecords",
    "Origin",
    "Position",
    "decode_checkpoint",
    "encode_checkpoint",
    "fingerprint",
    "kept_workload",
    "load_checkpoint",
    "write_atomically",
]

VERSION = 1
FILE_NAME = "checkpoint.json"


class CheckpointRefused(ValueError):
    """A checkpoint that cannot be trusted; the agent replays the topic from the beginning instead."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Origin:
    """What a checkpoint belongs to: a broker, a topic prefix and this agent's GPUs (its record filter)."""

    bootstrap: str
    topic_prefix: str
    gpus: str  # fingerprint of the sorted GPU uuids

    @classmethod
    def of(cls, *, bootstrap: str, topic_prefix: str, gpus: Iterable[str]) -> Origin:
        """The origin of an agent over these GPUs."""
        return cls(bootstrap, topic_prefix, fingerprint("\n".join(sorted(gpus)).encode()))


@dataclass(frozen=True, slots=True)
class Position:
    """Where to read a partition on: the next offset and the fingerprint of the record before it."""

    next_offset: int
    tail: str | None = None  # None when no record before it was read


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The kept records, in consumption order, and the positions after the last applied record."""

    origin: Origin
    positions: Mapping[TopicPartition, Position]
    records: tuple[bytes, ...] = ()


def fingerprint(value: bytes | None) -> str:
    """A short digest of a record's value: tells the record a position follows from any other."""
    return hashlib.sha256(value or b"").hexdigest()[:32]


def kept_workload(event: Event) -> str | None:
    """The workload whose state a scheduler event changes in the book, if it is one the book applies."""
    if isinstance(event, WorkloadPlacedV1 | WorkloadMigratingV1 | WorkloadEndedV1):
        return event.workload_id
    return None


class KeptRecords:
    """Tracks, as records are applied, the records of held workloads and the positions reached."""

    def __init__(self, *, holds: Callable[[str], bool]) -> None:
        self._holds = holds
        self._records: dict[str, list[tuple[int, bytes]]] = {}  # workload -> (sequence, raw record)
        self._positions: dict[TopicPartition, Position] = {}
        self._seq = 0
        self.dirty = False

    def resume(self, positions: Mapping[TopicPartition, Position]) -> None:
        """Start from a restored checkpoint's positions."""
        self._positions.update(positions)

    def advance(self, tp: TopicPartition, *, offset: int, value: bytes | None) -> None:
        """A record of this partition was applied: read on after it."""
        self._positions[tp] = Position(offset + 1, fingerprint(value))
        self.dirty = True

    def note(self, workload_id: str, raw: bytes, *, was_held: bool) -> None:
        """Keep a record applied for this workload while the book holds it; forget it once it does not.

        ``was_held`` is whether the book held the workload before the record: records kept from an
        earlier stay (ended since by a runner report) must not be replayed before this one.
        """
        if not was_held:
            self._records.pop(workload_id, None)
        if self._holds(workload_id):
            self._seq += 1
            self._records.setdefault(workload_id, []).append((self._seq, raw))
        else:
            self._records.pop(workload_id, None)
        self.dirty = True

    def prune(self) -> None:
        """Forget the records of workloads the book let go of since (a job that finished by itself)."""
        for workload_id in [w for w in self._records if not self._holds(w)]:
            del self._records[workload_id]

    def workloads(self) -> frozenset[str]:
        """The workloads whose records are kept."""
        return frozenset(self._records)

    def snapshot(self, origin: Origin) -> Checkpoint:
        """The checkpoint of now (prune first): kept records merged back into consumption order."""
        merged = sorted(r for records in self._records.values() for r in records)
        return Checkpoint(origin=origin, positions=dict(self._positions), records=tuple(r for _, r in merged))


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    """The file's bytes."""
    o = checkpoint.origin
    doc = {
        "version": VERSION,
        "bootstrap": o.bootstrap,
        "topic_prefix": o.topic_prefix,
        "gpus": o.gpus,
        "positions": [
            {"topic": tp.topic, "partition": tp.partition, "next": p.next_offset, "tail": p.tail}
            for tp, p in sorted(checkpoint.positions.items())
        ],
        "records": [base64.b64encode(r).decode("ascii") for r in checkpoint.records],
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_checkpoint(data: bytes, *, expect: Origin) -> Checkpoint:
    """The checkpoint in these bytes; CheckpointRefused says why when it is not this agent's or broken."""
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict):
            raise CheckpointRefused("not a JSON object")
        return _checkpoint_of(doc, expect=expect)
    except CheckpointRefused:
        raise
    except (ValueError, TypeError, KeyError, binascii.Error) as exc:
        raise CheckpointRefused(f"unreadable: {type(exc).__name__}: {exc}") from exc


def _checkpoint_of(doc: dict[str, Any], *, expect: Origin) -> Checkpoint:
    if doc.get("version") != VERSION:
        raise CheckpointRefused(f"version {doc.get('version')!r}, this agent writes {VERSION}")
    origin = Origin(str(doc["bootstrap"]), str(doc["topic_prefix"]), str(doc["gpus"]))
    if origin.bootstrap != expect.bootstrap or origin.topic_prefix != expect.topic_prefix:
        raise CheckpointRefused(
            f"written for broker {origin.bootstrap!r} and topic prefix {origin.topic_prefix!r}, "
            f"not {expect.bootstrap!r} and {expect.topic_prefix!r}"
        )
    if origin.gpus != expect.gpus:
        raise CheckpointRefused("written for another set of GPUs")
    positions = {
        TopicPartition(str(p["topic"]), _int(p["partition"])): Position(_int(p["next"]), _tail(p["tail"]))
        for p in doc["positions"]
    }
    records = tuple(base64.b64decode(r, validate=True) for r in doc["records"])
    return Checkpoint(origin=origin, positions=positions, records=records)


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CheckpointRefused(f"not an offset: {value!r}")
    return value


def _tail(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise CheckpointRefused(f"not a fingerprint: {value!r}")
    return value


def load_checkpoint(path: Path, *, expect: Origin) -> Checkpoint | None:
    """The checkpoint at path, None when there is none yet; CheckpointRefused when it cannot be used."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointRefused(f"cannot read {path}: {exc}") from exc
    return decode_checkpoint(data, expect=expect)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace path's content with data: readers see the old file or the new one, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)  # the rename itself survives a power cut


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
