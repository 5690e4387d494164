"""Live streams over faked services: ids, filtering, change-only alerts, heartbeats and resume."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from pathlib import Path

from services.gateway.domain.live import LiveRequest
from services.gateway.service.live import Attachment, LiveHub
from tests.unit.gateway.fakes import TENANT_KEY, FakeServices, gateway_app

NOTHING = LiveRequest(gpus=frozenset(), alerts=False, incidents=False)


def _hub(tmp_path: Path, services: FakeServices, **settings: object) -> LiveHub:
    return gateway_app(services, console_dir=tmp_path, **settings)[1]


async def _never_refused() -> bool:
    return False


def _frames(hub: LiveHub, attachment: Attachment, wants: LiveRequest) -> AsyncGenerator[str, None]:
    return hub.frames(attachment, wants=wants, api_key=TENANT_KEY, refused=_never_refused)


def _event(frame: str) -> tuple[str, str, dict[str, object]]:
    fields = dict(line.split(": ", 1) for line in frame.strip().split("\n"))
    return fields["id"], fields["event"], json.loads(fields["data"])


async def test_a_stream_numbers_its_events_sends_only_followed_gpus_and_alerts_once(tmp_path: Path) -> None:
    services = FakeServices(alerts=[{"fingerprint": "f1"}])
    hub = _hub(tmp_path, services)
    attached = hub.attach(owner="s1", last_event_id=None)
    stream = attached.stream
    frames = _frames(hub, attached, LiveRequest(gpus=frozenset({"GPU-a"}), alerts=True, incidents=False))
    assert await anext(frames) == "retry: 2000\n\n"
    events = [_event(await anext(frames)) for _ in range(4)]
    await frames.aclose()
    ids = [event_id for event_id, _, _ in events]
    assert ids == [f"{stream.token}.{seq}" for seq in range(1, 5)]
    samples = [data for _, kind, data in events if kind == "samples"]
    assert samples
    assert all(d == {"samples": [{"gpu": "GPU-a", "node": "n1", "sm_util_pct": 50.0}]} for d in samples)
    assert [data for _, kind, data in events if kind == "alerts"] == [{"alerts": [{"fingerprint": "f1"}]}]
    assert stream.outlet is None
    assert hub.streams[stream.token] is stream
    # Telemetry is asked for the followed GPUs only, not the caller's whole fleet.
    asked = [r for r in services.seen if r.url.path == "/v1/stream"]
    assert asked
    assert {r.url.params.get("gpus") for r in asked} == {"GPU-a"}


async def test_a_browser_coming_back_with_last_event_id_gets_what_it_missed_then_more(tmp_path: Path) -> None:
    hub = _hub(tmp_path, FakeServices())
    wants = LiveRequest(gpus=frozenset({"GPU-b"}), alerts=False, incidents=False)
    attached = hub.attach(owner="s1", last_event_id=None)
    token = attached.stream.token
    frames = _frames(hub, attached, wants)
    await anext(frames)
    first = [await anext(frames) for _ in range(3)]
    await frames.aclose()

    again = hub.attach(owner="s1", last_event_id=f"{token}.1")
    assert again.stream is attached.stream
    assert again.missed == first[1:]
    resumed = _frames(hub, again, wants)
    assert await anext(resumed) == "retry: 2000\n\n"
    assert [await anext(resumed) for _ in range(2)] == first[1:]
    next_id, _, _ = _event(await anext(resumed))
    await resumed.aclose()
    assert next_id == f"{token}.4"


async def test_a_resume_takes_over_a_connection_not_yet_seen_closing(tmp_path: Path) -> None:
    hub = _hub(tmp_path, FakeServices())
    old = hub.attach(owner="s1", last_event_id=None)
    old_frames = _frames(hub, old, NOTHING)
    await anext(old_frames)
    new = hub.attach(owner="s1", last_event_id=f"{old.stream.token}.0")
    assert new.stream is old.stream
    assert [frame async for frame in old_frames] == []  # the old connection ends
    assert new.stream.outlet is new.outlet  # and leaving did not detach the new one


async def test_another_sessions_or_an_unknown_stream_id_starts_a_new_stream(tmp_path: Path) -> None:
    hub = _hub(tmp_path, FakeServices())
    attached = hub.attach(owner="s1", last_event_id=None)
    hub.detach(attached)
    foreign = hub.attach(owner="s2", last_event_id=f"{attached.stream.token}.0")
    assert foreign.stream is not attached.stream
    assert foreign.missed == []
    unknown = hub.attach(owner="s1", last_event_id="gone.3")
    assert unknown.stream.token not in (attached.stream.token, foreign.stream.token)


async def test_an_idle_stream_sends_heartbeats(tmp_path: Path) -> None:
    hub = _hub(tmp_path, FakeServices(), heartbeat_s=0.05)
    frames = _frames(hub, hub.attach(owner="s1", last_event_id=None), NOTHING)
    assert [await anext(frames) for _ in range(3)] == [
        "retry: 2000\n\n",
        ": heartbeat\n\n",
        ": heartbeat\n\n",
    ]
    await frames.aclose()


async def test_a_stream_whose_key_is_refused_ends_once_the_session_is_gone(tmp_path: Path) -> None:
    hub = _hub(tmp_path, FakeServices(revoked={TENANT_KEY}))
    calls: list[bool] = []

    async def refused() -> bool:
        calls.append(True)
        return True

    wants = LiveRequest(gpus=frozenset(), alerts=True, incidents=False)
    frames = hub.frames(
        hub.attach(owner="s1", last_event_id=None), wants=wants, api_key=TENANT_KEY, refused=refused
    )
    assert [frame async for frame in frames] == ["retry: 2000\n\n"]
    assert calls == [True]


async def test_detached_streams_expire(tmp_path: Path) -> None:
    now = [0.0]
    hub = _hub(tmp_path, FakeServices())
    hub.clock = lambda: now[0]
    attached = hub.attach(owner="s1", last_event_id=None)
    hub.detach(attached)
    now[0] = hub.config.expiry_s + 1
    fresh = hub.attach(owner="s1", last_event_id=f"{attached.stream.token}.0")
    assert fresh.stream is not attached.stream
    assert attached.stream.token not in hub.streams
