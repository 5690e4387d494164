"""The fake notifier's script: answers in order per URL, the last repeating, and what reached a receiver."""

from __future__ import annotations

import pytest

from services.alerting.adapters.receiver_client_fake import FakeReceiverClient, Reply, TimedOut, Unreachable
from services.alerting.domain.outgoing import OutgoingRequest

URL = "http://pager.test/hook"


def _request(url: str = URL, body: bytes = b"{}") -> OutgoingRequest:
    return OutgoingRequest(url=url, body=body, headers={"Idempotency-Key": "n1"})


async def test_a_url_answers_its_script_in_order_then_repeats_the_last_answer() -> None:
    fake = FakeReceiverClient()
    fake.script(URL, Unreachable(), Reply(status=503, headers={"retry-after": "5"}), Reply(status=200))

    answers = [await fake.send(_request()) for _ in range(4)]

    assert answers == [
        (None, None, "ConnectError: All connection attempts failed"),
        (503, "5", "HTTP 503: "),
        (200, None, None),
        (200, None, None),
    ]


async def test_every_request_is_recorded_but_only_those_a_receiver_took_were_received() -> None:
    fake = FakeReceiverClient(default=Unreachable())
    fake.script(URL, TimedOut(), Reply(status=204))

    for n in range(3):
        await fake.send(_request(body=str(n).encode()))
    await fake.send(_request("http://nobody.test/hook"))

    assert [r.body for r in fake.requests] == [b"0", b"1", b"2", b"{}"]
    assert [r.body for r in fake.received(URL)] == [b"0", b"1", b"2"]
    assert fake.received("http://nobody.test/hook") == []


def test_a_script_needs_an_answer() -> None:
    with pytest.raises(ValueError, match="at least one answer"):
        FakeReceiverClient().script(URL)
