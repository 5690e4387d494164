"""What the agent process needs of the outside world, as protocols that adapters and fakes fit."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Publisher"]


class Publisher(Protocol):
    """The agent's producer (adapters/agent/publisher.py, or its fake): messages go out by topic and key,
    each key always to the same partition and in order, and a flush waits until all were acknowledged."""

    def open(self, *, bootstrap: str, client_id: str) -> None:
        """Create the producer (it connects on start)."""
        ...

    async def start(self) -> None:
        """Connect."""
        ...

    async def stop(self) -> None:
        """Close; flush first: what was queued since the last flush may be lost."""
        ...

    async def publish(self, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
        """Queue (key, value) messages at once (a slice of node batches); flush waits for them."""
        ...

    def queue(self, topic: str, *, key: bytes, value: bytes) -> None:
        """Queue one message; flush waits for it."""
        ...

    async def flush(self) -> None:
        """Wait until every message queued since the last flush is acknowledged; raises when one failed."""
        ...
