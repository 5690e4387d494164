"""Server-Sent Events: framing what the gateway sends, parsing what telemetry sends, and the resume buffer.

An event id is ``<stream token>.<seq>``; seq rises by one per event of a stream, so a browser that comes
back with ``Last-Event-ID`` names both the stream and the last event it read.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "HEARTBEAT",
    "ResumeBuffer",
    "SseEvent",
    "SseParser",
    "event_frame",
    "parse_event_id",
    "retry_frame",
]

#: The comment line that keeps proxies and the browser from timing an idle stream out.
HEARTBEAT = ": heartbeat\n\n"


def retry_frame(retry_ms: int) -> str:
    """The field telling EventSource how long to wait before reconnecting."""
    return f"retry: {retry_ms}\n\n"


def event_frame(*, event_id: str, event: str, data: Any) -> str:
    """One event with its id, type and JSON data (JSON holds no raw line break: one data line)."""
    return f"id: {event_id}\nevent: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def parse_event_id(value: str | None) -> tuple[str, int] | None:
    """(stream token, seq) of a ``Last-Event-ID``, or None when it is absent or not one of ours."""
    if not value:
        return None
    token, dot, seq = value.strip().rpartition(".")
    if not dot or not token or not seq.isdigit():
        return None
    return token, int(seq)


@dataclass(slots=True)
class ResumeBuffer:
    """The last ``capacity`` frames of a stream by seq, so a reconnecting browser misses none of them."""

    capacity: int
    _frames: deque[tuple[int, str]] = field(init=False)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError("a resume buffer holds at least one event")
        self._frames = deque(maxlen=self.capacity)

    def append(self, seq: int, frame: str) -> None:
        """Keep one frame (seqs are appended in increasing order); the oldest falls out when full."""
        if self._frames and seq <= self._frames[-1][0]:
            raise ValueError(f"seq {seq} is not after {self._frames[-1][0]}")
        self._frames.append((seq, frame))

    def after(self, seq: int) -> list[str]:
        """Frames with a seq above ``seq``, oldest first (those already fallen out are gone)."""
        return [frame for s, frame in self._frames if s > seq]

    @property
    def last_seq(self) -> int:
        """The seq of the newest frame kept, 0 when none."""
        return self._frames[-1][0] if self._frames else 0

    def __len__(self) -> int:
        return len(self._frames)


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event read from an upstream stream."""

    event: str
    data: str
    id: str | None = None


@dataclass(slots=True)
class SseParser:
    """Incremental parser of an event stream (the WHATWG rules: fields, comments, blank line dispatches)."""

    _buffer: str = ""
    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None

    def feed(self, text: str) -> Iterator[SseEvent]:
        """The events completed by ``text`` (a chunk may end mid-line; the rest waits for the next)."""
        self._buffer += text
        *lines, self._buffer = self._buffer.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        for line in lines:
            done = self._line(line)
            if done is not None:
                yield done

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._data:
            self._event = ""
            return None
        done = SseEvent(event=self._event or "message", data="\n".join(self._data), id=self._id)
        self._event, self._data = "", []
        return done
