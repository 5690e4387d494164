"""An in-memory twin of ReceiverClient for unit tests: scripted answers per URL, every request recorded.

It answers what ReceiverClient answers for the same reply from a receiver, error strings included
(tests/integration/alerting/test_notifier_contract.py holds the two together).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from services.alerting.domain.outgoing import OutgoingRequest

__all__ = ["Answer", "FakeReceiverClient", "Reply", "TimedOut", "Unreachable"]


@dataclass(frozen=True, slots=True)
class Reply:
    """The receiver answered: a status, its headers (Retry-After, say) and a body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = ""


@dataclass(frozen=True, slots=True)
class Unreachable:
    """Nothing took the connection (refused, no route); the receiver never saw the request."""

    message: str = "All connection attempts failed"  # what httpx says of a refused connection


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The receiver took the request but did not answer within the client's timeout."""


Answer = Reply | Unreachable | TimedOut


class FakeReceiverClient:
    """Answers each URL from its script, in order, the last answer repeating; other URLs get `default`."""

    def __init__(self, *, default: Answer | None = None) -> None:
        self._default: Answer = default if default is not None else Reply(status=200)
        self._scripts: dict[str, list[Answer]] = {}
        self.requests: list[OutgoingRequest] = []  # every request sent, whatever answered
        self._received: dict[str, list[OutgoingRequest]] = {}

    def script(self, url: str, *answers: Answer) -> None:
        """What the receiver at `url` answers to the next sends, one answer each; the last one repeats."""
        if not answers:
            raise ValueError("script at least one answer")
        self._scripts[url] = list(answers)

    def received(self, url: str) -> list[OutgoingRequest]:
        """The requests that reached the receiver at `url` (answered or timed out), in order."""
        return list(self._received.get(url, []))

    async def send(self, request: OutgoingRequest) -> tuple[int | None, str | None, str | None]:
        """(status code, Retry-After header, error) of one attempt, as ReceiverClient.send says them."""
        answer = self._next(request.url)
        self.requests.append(request)
        if isinstance(answer, Unreachable):
            return None, None, f"ConnectError: {answer.message}"[:500]
        self._received.setdefault(request.url, []).append(request)
        if isinstance(answer, TimedOut):
            return None, None, "ReadTimeout: "
        retry_after = next((v for k, v in answer.headers.items() if k.lower() == "retry-after"), None)
        success = 200 <= answer.status < 300
        error = None if success else f"HTTP {answer.status}: {answer.body[:200]}"
        return answer.status, retry_after, error

    def _next(self, url: str) -> Answer:
        script = self._scripts.get(url)
        if not script:
            return self._default
        return script.pop(0) if len(script) > 1 else script[0]
