"""Live streams: one per browser tab, fed by telemetry's sample stream and by polls of alerts and
incidents, each made with the caller's own key; resumable for a while after the browser goes away."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from services.gateway.adapters.upstream import UpstreamDown, UpstreamRefused, Upstreams
from services.gateway.domain.live import LiveRequest, rows_of
from services.gateway.domain.sse import HEARTBEAT, ResumeBuffer, event_frame, parse_event_id, retry_frame
from services.gateway.service.metrics import LIVE_STREAMS, SAMPLES_SENT

__all__ = ["Attachment", "LiveConfig", "LiveHub", "LiveStream"]

log = logging.getLogger(__name__)

RETRY_MS = 2000
_UNSET: Any = object()
_BACKOFF_FIRST_S, _BACKOFF_MAX_S = 1.0, 10.0


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """Timings and sizes of live streams (from the gateway's settings)."""

    heartbeat_s: float
    poll_s: float
    resume_buffer: int
    expiry_s: float


@dataclass
class LiveStream:
    """One stream's identity, its numbered events and the last lists it sent.

    ``outlet`` is the queue of the connection reading it now (None while no browser is attached)."""

    token: str
    owner: str
    buffer: ResumeBuffer
    seq: int = 0
    outlet: asyncio.Queue[str | None] | None = None
    detached_at: float | None = None
    last: dict[str, Any] = field(default_factory=dict)

    def emit(self, event: str, data: Any) -> None:
        """Number, frame, keep and send one event; a browser too far behind is cut off (it resumes)."""
        self.seq += 1
        frame = event_frame(event_id=f"{self.token}.{self.seq}", event=event, data=data)
        self.buffer.append(self.seq, frame)
        if self.outlet is not None:
            self.outlet.put_nowait(frame)
            if self.outlet.qsize() > self.buffer.capacity:
                self.end()

    def end(self) -> None:
        """Close the attached browser's connection after what is queued."""
        if self.outlet is not None:
            self.outlet.put_nowait(None)


@dataclass(frozen=True, slots=True)
class Attachment:
    """One browser connection to a stream: what it missed, and the queue it reads."""

    stream: LiveStream
    missed: list[str]
    outlet: asyncio.Queue[str | None]


@dataclass
class LiveHub:
    """Every live stream of this process, attached or resumable, by token."""

    upstreams: Upstreams
    config: LiveConfig
    clock: Callable[[], float] = time.monotonic
    streams: dict[str, LiveStream] = field(default_factory=dict)

    def attach(self, *, owner: str, last_event_id: str | None) -> Attachment:
        """The stream a browser resumes (with the frames it missed), or a new one.

        A resume of a stream still attached takes it over: the old connection is one the gateway has
        not yet seen close (the browser reconnected at once)."""
        self._expire()
        resumed = parse_event_id(last_event_id)
        stream = self.streams.get(resumed[0]) if resumed else None
        missed: list[str] = []
        if resumed is None or stream is None or stream.owner != owner:
            stream = LiveStream(token=secrets.token_urlsafe(12), owner=owner, buffer=self._buffer())
            self.streams[stream.token] = stream
        else:
            missed = stream.buffer.after(resumed[1])
            stream.end()
        stream.outlet, stream.detached_at = asyncio.Queue(), None
        return Attachment(stream=stream, missed=missed, outlet=stream.outlet)

    def detach(self, attachment: Attachment) -> None:
        """The browser went away: keep the stream resumable for the expiry period."""
        stream = attachment.stream
        if stream.outlet is attachment.outlet:  # not taken over by a newer connection
            stream.outlet, stream.detached_at = None, self.clock()

    def _buffer(self) -> ResumeBuffer:
        return ResumeBuffer(capacity=self.config.resume_buffer)

    def _expire(self) -> None:
        cutoff = self.clock() - self.config.expiry_s
        for token in [
            t for t, s in self.streams.items() if s.detached_at is not None and s.detached_at < cutoff
        ]:
            del self.streams[token]

    async def frames(
        self,
        attachment: Attachment,
        *,
        wants: LiveRequest,
        api_key: str,
        refused: Callable[[], Awaitable[bool]],
    ) -> AsyncGenerator[str, None]:
        """What the browser reads: retry, the missed frames, then events and heartbeats until it leaves.

        ``refused`` is called when a service refuses the key (401); True means the session is gone and
        the stream ends."""
        feeds = _Feeds(hub=self, stream=attachment.stream, api_key=api_key, refused=refused)
        tasks = [asyncio.create_task(feed) for feed in feeds.for_request(wants)]
        LIVE_STREAMS.inc()
        try:
            yield retry_frame(RETRY_MS)
            for frame in attachment.missed:
                yield frame
            async for frame in self._sent(attachment.outlet):
                yield frame
        finally:
            LIVE_STREAMS.dec()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.detach(attachment)

    async def _sent(self, outlet: asyncio.Queue[str | None]) -> AsyncIterator[str]:
        beat_at = self.clock() + self.config.heartbeat_s
        while True:
            try:
                frame = await asyncio.wait_for(outlet.get(), timeout=max(0.0, beat_at - self.clock()))
            except TimeoutError:
                beat_at = self.clock() + self.config.heartbeat_s
                yield HEARTBEAT
                continue
            if frame is None:
                return
            yield frame


@dataclass
class _Feeds:
    """The producers of one attached stream; each runs until cancelled."""

    hub: LiveHub
    stream: LiveStream
    api_key: str
    refused: Callable[[], Awaitable[bool]]

    def for_request(self, wants: LiveRequest) -> list[Coroutine[Any, Any, None]]:
        feeds: list[Coroutine[Any, Any, None]] = []
        if wants.gpus:
            feeds.append(self._samples(wants.gpus))
        if wants.alerts:
            feeds.append(self._poll("alerting", "/v1/alerts?state=all", "alerts"))
        if wants.incidents:
            feeds.append(self._poll("recovery", "/v1/incidents", "incidents"))
        return feeds

    async def _samples(self, gpus: frozenset[str]) -> None:
        # Telemetry reads the followed GPUs' samples alone (an admin's tab would otherwise carry the fleet).
        params = {"gpus": ",".join(sorted(gpus))}
        backoff = _BACKOFF_FIRST_S
        while True:
            try:
                async for event in self.hub.upstreams.events(
                    "telemetry", "/v1/stream", api_key=self.api_key, params=params
                ):
                    if event.event == "samples":
                        self._send_samples(json.loads(event.data).get("samples", []), gpus)
                        backoff = _BACKOFF_FIRST_S
            except (UpstreamDown, UpstreamRefused, ValueError) as exc:
                if await self._gone(exc):
                    return
                log.warning("live stream %s: telemetry stream failed (%s)", self.stream.token, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    def _send_samples(self, rows: list[dict[str, Any]], gpus: frozenset[str]) -> None:
        chosen = rows_of(rows, gpus)
        self.stream.emit("samples", {"samples": chosen})
        SAMPLES_SENT.inc(len(chosen))

    async def _poll(self, service: str, path: str, name: str) -> None:
        while True:
            try:
                items = await self.hub.upstreams.get_json(service, path, api_key=self.api_key)
            except (UpstreamDown, UpstreamRefused, ValueError) as exc:
                if await self._gone(exc):
                    return
                log.warning("live stream %s: %s poll failed (%s)", self.stream.token, service, exc)
            else:
                if items != self.stream.last.get(name, _UNSET):
                    self.stream.last[name] = items
                    self.stream.emit(name, {name: items})
            await asyncio.sleep(self.hub.config.poll_s)

    async def _gone(self, exc: Exception) -> bool:
        """Whether a failure means the session is over (the key refused and confirmed revoked)."""
        if isinstance(exc, UpstreamRefused) and exc.status == 401:
            with contextlib.suppress(UpstreamDown, UpstreamRefused):
                if await self.refused():
                    self.stream.end()
                    return True
        return False
