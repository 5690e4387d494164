"""One contract for the notifier the delivery worker sends through: FakeReceiverClient and ReceiverClient.

The real client posts to a local HTTP receiver started here, which answers each path as scripted; the
fake is scripted with the same answers. Both must say the same (status, Retry-After, error) and let the
same bytes and signed headers reach the receiver.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus

import pytest

from libs.devkit.broker import free_port
from services.alerting.adapters.receiver_client import ReceiverClient
from services.alerting.adapters.receiver_client_fake import (
    Answer,
    FakeReceiverClient,
    Reply,
    TimedOut,
    Unreachable,
)
from services.alerting.domain.grouping import Notification
from services.alerting.domain.outgoing import IDEMPOTENCY_HEADER, OutgoingRequest, build_request
from services.alerting.domain.signing import verify
from services.alerting.service.ports import Notifier

pytestmark = pytest.mark.integration

TIMEOUT_S = 0.5
SECRET = "contract-signing-secret"
STAMP = 1_741_944_600


@dataclass(frozen=True, slots=True)
class Arrived:
    """One request as the receiver saw it: header names lower-cased, the body as bytes."""

    headers: dict[str, str]
    body: bytes


@dataclass
class LocalReceiver:
    """An HTTP/1.1 server on a free port that answers each path from `answers` (200 when unscripted)."""

    port: int = field(default_factory=free_port)
    answers: dict[str, Answer] = field(default_factory=dict)
    arrived: dict[str, list[Arrived]] = field(default_factory=dict)
    _server: asyncio.Server | None = None
    _connections: dict[asyncio.Task[None], asyncio.StreamWriter] = field(default_factory=dict)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._connections.values():  # the client has hung up; end what is left at once
            writer.close()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        try:
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                await self._answer(reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self._connections.pop(task, None)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            path, headers = _head(await reader.readuntil(b"\r\n\r\n"))
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.arrived.setdefault(path, []).append(Arrived(headers=headers, body=body))
            answer = self.answers.get(path, Reply(status=200))
            if isinstance(answer, TimedOut):
                await reader.read()  # answer nothing until the client gives up and hangs up
                return
            assert isinstance(answer, Reply)
            writer.write(_response(answer))
            await writer.drain()


def _head(raw: bytes) -> tuple[str, dict[str, str]]:
    lines = raw.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
    return lines[0].split(" ")[1], headers


def _response(reply: Reply) -> bytes:
    body = reply.body.encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
    head = f"HTTP/1.1 {reply.status} {HTTPStatus(reply.status).phrase}\r\n{extra}"
    return f"{head}content-length: {len(body)}\r\n\r\n".encode() + body


@dataclass(frozen=True, slots=True)
class Subject:
    client: Notifier
    receiver_for: Callable[[Answer], str]  # the URL of a receiver that gives this answer
    arrived: Callable[[str], list[Arrived]]  # what reached the receiver at a URL


@contextlib.asynccontextmanager
async def fake_subject() -> AsyncIterator[Subject]:
    fake = FakeReceiverClient()
    numbers = itertools.count()

    def receiver_for(answer: Answer) -> str:
        url = f"http://receiver-{next(numbers)}.test/hook"
        fake.script(url, answer)
        return url

    def arrived(url: str) -> list[Arrived]:
        return [Arrived(headers=_lower(r.headers), body=r.body) for r in fake.received(url)]

    yield Subject(client=fake, receiver_for=receiver_for, arrived=arrived)


@contextlib.asynccontextmanager
async def http_subject() -> AsyncIterator[Subject]:
    receiver = LocalReceiver()
    numbers = itertools.count()
    await receiver.start()

    def receiver_for(answer: Answer) -> str:
        if isinstance(answer, Unreachable):
            return f"http://127.0.0.1:{free_port()}/hook"  # nobody listens there: refused
        path = f"/hook/{next(numbers)}"
        receiver.answers[path] = answer
        return f"http://127.0.0.1:{receiver.port}{path}"

    def arrived(url: str) -> list[Arrived]:
        return list(receiver.arrived.get("/" + url.split("/", 3)[3], []))

    try:
        async with ReceiverClient(timeout_s=TIMEOUT_S, max_connections=4) as client:
            yield Subject(client=client, receiver_for=receiver_for, arrived=arrived)
    finally:
        await receiver.stop()


@pytest.fixture(params=["fake", "http"])
async def subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    opened = fake_subject() if request.param == "fake" else http_subject()
    async with opened as subject:
        yield subject


def _lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _request(url: str) -> OutgoingRequest:
    notification = Notification(
        id="n-contract-1",
        receiver="default",
        group_key='{}:{alertname="MemHigh"}',
        group_labels={"alertname": "MemHigh"},
        alerts=(),
        created_at=datetime(2025, 3, 14, 9, 30, tzinfo=UTC),
    )
    return build_request(
        kind="webhook",
        url=url,
        notification=notification,
        secret=SECRET,
        routing_key=None,
        external_url="http://alerting.test",
        timestamp=STAMP,
    )


async def test_a_2xx_is_a_success_with_no_error_and_the_signed_request_arrives_as_sent(
    subject: Subject,
) -> None:
    request = _request(subject.receiver_for(Reply(status=202, body="queued")))

    assert await subject.client.send(request) == (202, None, None)

    [arrived] = subject.arrived(request.url)
    assert arrived.body == request.body
    assert _lower(request.headers).items() <= arrived.headers.items()
    assert arrived.headers[IDEMPOTENCY_HEADER.lower()] == "n-contract-1"
    assert verify(secret=SECRET.encode(), body=arrived.body, headers=arrived.headers, now=STAMP)


async def test_a_429_gives_its_retry_after_and_the_start_of_its_body(subject: Subject) -> None:
    reply = Reply(status=429, headers={"Retry-After": "30"}, body="slow down " + "x" * 300)
    request = _request(subject.receiver_for(reply))

    status, retry_after, error = await subject.client.send(request)

    assert (status, retry_after) == (429, "30")
    assert error == "HTTP 429: slow down " + "x" * 190  # the body cut at 200 characters


async def test_a_500_is_an_error_naming_the_status_and_body(subject: Subject) -> None:
    request = _request(subject.receiver_for(Reply(status=500, body="boom")))

    assert await subject.client.send(request) == (500, None, "HTTP 500: boom")
    assert len(subject.arrived(request.url)) == 1


async def test_a_refused_connection_has_no_status_and_the_request_never_arrives(subject: Subject) -> None:
    request = _request(subject.receiver_for(Unreachable()))

    assert await subject.client.send(request) == (None, None, "ConnectError: All connection attempts failed")
    assert subject.arrived(request.url) == []


async def test_a_timeout_has_no_status_though_the_receiver_may_have_the_request(subject: Subject) -> None:
    request = _request(subject.receiver_for(TimedOut()))

    assert await subject.client.send(request) == (None, None, "ReadTimeout: ")
    [arrived] = subject.arrived(request.url)  # hence the idempotency key: a retry may be a duplicate
    assert arrived.body == request.body
