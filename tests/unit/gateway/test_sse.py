"""SSE framing, Last-Event-ID parsing, the resume buffer and the parser of telemetry's stream."""

from __future__ import annotations

import json

import pytest

from services.gateway.domain.sse import (
    HEARTBEAT,
    ResumeBuffer,
    SseEvent,
    SseParser,
    event_frame,
    parse_event_id,
    retry_frame,
)


def test_an_event_is_one_id_one_type_and_one_json_data_line() -> None:
    frame = event_frame(event_id="tok.3", event="alerts", data={"alerts": [{"m": "a\nb"}]})
    lines = frame.split("\n")
    assert lines[:2] == ["id: tok.3", "event: alerts"]
    assert lines[2].startswith("data: ")
    assert json.loads(lines[2][6:]) == {"alerts": [{"m": "a\nb"}]}
    assert frame.endswith("\n\n")
    assert frame.count("\n") == 4


def test_retry_and_heartbeat_frame_as_the_contract_says() -> None:
    assert retry_frame(2000) == "retry: 2000\n\n"
    assert HEARTBEAT == ": heartbeat\n\n"


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("abc.7", ("abc", 7)), ("a.b-c_.12", ("a.b-c_", 12)), (None, None), ("", None), ("abc", None),
     ("abc.x", None), (".5", None), ("abc.-1", None)],
)  # fmt: skip
def test_last_event_id_names_the_stream_and_seq(value: str | None, parsed: tuple[str, int] | None) -> None:
    assert parse_event_id(value) == parsed


def test_the_resume_buffer_replays_what_came_after_and_forgets_the_oldest() -> None:
    buffer = ResumeBuffer(capacity=3)
    for seq in range(1, 6):
        buffer.append(seq, f"f{seq}")
    assert len(buffer) == 3
    assert buffer.last_seq == 5
    assert buffer.after(3) == ["f4", "f5"]
    assert buffer.after(0) == ["f3", "f4", "f5"]
    assert buffer.after(5) == []
    with pytest.raises(ValueError, match="not after"):
        buffer.append(5, "again")
    with pytest.raises(ValueError, match="at least one"):
        ResumeBuffer(capacity=0)


def test_the_parser_reads_events_split_anywhere_and_skips_comments() -> None:
    stream = 'event: samples\ndata: {"samples": []}\n\n: heartbeat\n\nretry: 5\nid: 9\r\ndata: a\ndata: b\n\n'
    parser = SseParser()
    events = [event for i in range(0, len(stream), 3) for event in parser.feed(stream[i : i + 3])]
    assert events == [
        SseEvent(event="samples", data='{"samples": []}'),
        SseEvent(event="message", data="a\nb", id="9"),
    ]
