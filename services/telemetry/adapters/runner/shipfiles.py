"""What the shipper reads on the host: a run's output log across its rotation, and its outputs/ files.

The supervisor's log.json says where output.log's bytes sit in the whole output; the inodes tell
output.log from output.log.1, so a rotation caught half way is seen and read a moment later instead.
Standard library only, and blocking: the shipper calls these in a thread.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.supervise import LOG_STATE

__all__ = ["ROTATED", "collect_outputs", "read_next", "read_range", "shown"]

ROTATED = files.LOG + ".1"


@dataclass(frozen=True, slots=True)
class _Segment:
    """One of output.log.1 and output.log, open, and where its bytes sit in the whole output."""

    file: BinaryIO
    base: int
    size: int

    @property
    def end(self) -> int:
        return self.base + self.size

    def read(self, start: int, end: int) -> bytes:
        return os.pread(self.file.fileno(), end - start, start - self.base)


@contextlib.contextmanager
def _segments(run_dir: Path) -> Iterator[list[_Segment] | None]:
    """The log files as they are now, oldest first; None while a rotation is under way."""
    with contextlib.ExitStack() as stack:
        before = files.read_json(run_dir / LOG_STATE)
        current = _open(run_dir / files.LOG, stack)
        rotated = _open(run_dir / ROTATED, stack) if current is not None else None
        after = files.read_json(run_dir / LOG_STATE)
        yield [] if current is None else _place(current, rotated, before, after)


def _open(path: Path, stack: contextlib.ExitStack) -> BinaryIO | None:
    try:
        return stack.enter_context(path.open("rb"))
    except FileNotFoundError:
        return None


def _place(
    current: BinaryIO, rotated: BinaryIO | None, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> list[_Segment] | None:
    cur = os.fstat(current.fileno())
    old = os.fstat(rotated.fileno()) if rotated is not None else None
    if old is not None and old.st_ino == cur.st_ino:
        return None  # output.log was renamed between the two opens
    if before is None:  # no log.json (a supervisor before it): one rotation at most is understood
        if after is not None:
            return None
        if rotated is None or old is None:
            return [_Segment(current, 0, cur.st_size)]
        return [_Segment(rotated, 0, old.st_size), _Segment(current, old.st_size, cur.st_size)]
    if before != after or cur.st_ino != before["inode"]:
        return None  # output.log was renamed meanwhile: what the files are is not known yet
    base, prev = int(before["base"]), int(before["prev_base"])
    found = [_Segment(current, base, cur.st_size)]
    if rotated is not None and old is not None and base > prev:
        found.insert(0, _Segment(rotated, prev, min(old.st_size, base - prev)))
    return found


def read_next(run_dir: Path, offset: int, limit: int) -> tuple[int, bytes] | None:
    """Up to ``limit`` bytes of the output from ``offset`` on, and where they start (later than offset
    when the quota rotated bytes away before they were read); None while a rotation is under way."""
    with _segments(run_dir) as found:
        if found is None:
            return None
        for seg in found:
            if offset < seg.end:
                start = max(offset, seg.base)
                return start, seg.read(start, min(seg.end, start + limit))
        return offset, b""


def read_range(run_dir: Path, start: int, end: int) -> bytes | None:
    """Bytes [start, end) of the output; None when they are no longer (or not yet) on the host."""
    with _segments(run_dir) as found:
        for seg in found or ():
            if seg.base <= start and end <= seg.end:
                return seg.read(start, end)
    return None


def shown(rel: str) -> str:
    """A file name as text: bytes that are no UTF-8 become U+FFFD."""
    return rel.encode(errors="surrogateescape").decode(errors="replace")


def collect_outputs(root: Path, cap: int) -> tuple[list[tuple[str, Path, int]], list[dict[str, Any]]]:
    """The regular files under root (by relative path) that fit in ``cap`` together, and the others."""
    found: list[tuple[str, Path, int]] = []
    dropped: list[dict[str, Any]] = []
    for here, dirs, names in os.walk(root):  # a linked folder is listed, never entered
        for name in (*dirs, *names):
            path = Path(here) / name
            rel = path.relative_to(root).as_posix()
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((rel, path, st.st_size))
            elif stat.S_ISLNK(st.st_mode):
                dropped.append({"path": shown(rel), "size": 0, "why": "a symbolic link (not followed)"})
            elif not stat.S_ISDIR(st.st_mode):
                dropped.append({"path": shown(rel), "size": st.st_size, "why": "not a regular file"})
    kept, total = [], 0
    for rel, path, size in sorted(found):
        if total + size <= cap:
            kept.append((rel, path, size))
            total += size
        else:
            why = f"over the outputs cap of {cap} bytes"
            dropped.append({"path": shown(rel), "size": size, "why": why})
    return kept, sorted(dropped, key=lambda d: str(d["path"]))
