"""The object layout shared by the writer (the node agent) and the reader (the scheduler's API).

Everything of one workload is under ``<kind>/<workload id>/``, so retention and deletion work by prefix:

- ``logs/<workload>/<placement>/<seq>-<unix ms>.log``: stdout and stderr as the agent shipped them, in
  chunks; ``seq`` (10 digits) orders them within a placement, ``unix ms`` is when the agent read the
  chunk (what ``since`` filters on). A placement's chunks concatenated are its log as the host kept it.
  ``logs/<workload>/<placement>/end.json`` is written after the last chunk of a placement that ended.
- ``outputs/<workload>/<placement>/files/<path>``: what the job left under ``$GPUCLOUD_OUTPUT_DIR``;
  ``outputs/<workload>/<placement>/manifest.json`` is written last, so a manifest means complete.
- ``checkpoints/<workload>/<placement>/files/<path>`` and its ``manifest.json``, likewise: the
  checkpoint a migrating workload wrote on the placement it left.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "LogChunkKey",
    "checkpoint_file",
    "checkpoint_manifest",
    "checkpoint_prefix",
    "log_chunk",
    "log_end",
    "log_prefix",
    "output_file",
    "output_manifest",
    "output_prefix",
    "parse_log_chunk",
]

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")
_CHUNK = re.compile(r"^logs/([^/]+)/([^/]+)/(\d{10})-(\d{1,16})\.log$")


def _id(value: str, what: str) -> str:
    if not _ID.match(value) or ".." in value:
        raise ValueError(f"{what} {value!r} cannot name an object")
    return value


def _rel(path: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"file path {path!r}: expected a relative path without '.', '..' or '//'")
    return path


def log_prefix(workload_id: str, placement_id: str | None = None) -> str:
    base = f"logs/{_id(workload_id, 'workload id')}/"
    return base if placement_id is None else f"{base}{_id(placement_id, 'placement id')}/"


def log_chunk(workload_id: str, placement_id: str, *, seq: int, unix_ms: int) -> str:
    if not 0 <= seq < 10**10:
        raise ValueError(f"log chunk seq {seq} out of range")
    return f"{log_prefix(workload_id, placement_id)}{seq:010d}-{unix_ms}.log"


def log_end(workload_id: str, placement_id: str) -> str:
    """Written after a placement's last chunk: nothing more will come (what a follower waits for)."""
    return f"{log_prefix(workload_id, placement_id)}end.json"


@dataclass(frozen=True, slots=True)
class LogChunkKey:
    workload_id: str
    placement_id: str
    seq: int
    unix_ms: int


def parse_log_chunk(key: str) -> LogChunkKey | None:
    """The parts of a log chunk's key; None for a key that is not one."""
    m = _CHUNK.match(key)
    if m is None:
        return None
    return LogChunkKey(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)))


def output_prefix(workload_id: str, placement_id: str | None = None) -> str:
    base = f"outputs/{_id(workload_id, 'workload id')}/"
    return base if placement_id is None else f"{base}{_id(placement_id, 'placement id')}/"


def output_file(workload_id: str, placement_id: str, path: str) -> str:
    return f"{output_prefix(workload_id, placement_id)}files/{_rel(path)}"


def output_manifest(workload_id: str, placement_id: str) -> str:
    return f"{output_prefix(workload_id, placement_id)}manifest.json"


def checkpoint_prefix(workload_id: str, placement_id: str | None = None) -> str:
    base = f"checkpoints/{_id(workload_id, 'workload id')}/"
    return base if placement_id is None else f"{base}{_id(placement_id, 'placement id')}/"


def checkpoint_file(workload_id: str, placement_id: str, path: str) -> str:
    return f"{checkpoint_prefix(workload_id, placement_id)}files/{_rel(path)}"


def checkpoint_manifest(workload_id: str, placement_id: str) -> str:
    return f"{checkpoint_prefix(workload_id, placement_id)}manifest.json"
