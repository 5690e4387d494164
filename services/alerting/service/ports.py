"""What the delivery worker needs of the outside world, as protocols that adapters and fakes fit."""

from __future__ import annotations

from typing import Protocol

from services.alerting.domain.outgoing import OutgoingRequest

__all__ = ["Notifier"]


class Notifier(Protocol):
    """Sends one notification request to its receiver (adapters/receiver_client.py, or its fake)."""

    async def send(self, request: OutgoingRequest) -> tuple[int | None, str | None, str | None]:
        """(status code, Retry-After header, error) of one attempt; no status when nothing answered.

        The error is None on a 2xx, ``HTTP <status>: <start of the body>`` on any other answer, and
        ``<httpx exception name>: <message>`` when nothing answered (refused, unresolvable, timed out).
        """
        ...
