"""Which broker a client talks to, and whether it is still the one whose log the client knows.

A broker that restarts empty (the embedded broker keeps its log in memory) or is replaced by an empty one
has lost every record and committed offset: producers must publish again what it has not got, consumers
must read the new log from its beginning. Its identity is the cluster id of the metadata response (Apache
Kafka keeps it in the log directory, so a restart with its data keeps it and an empty replacement has a new
one; the embedded broker gets a fresh one at every start). A broker whose id does not change still shows
its new log: a consumer's position beyond the log end, a producer's offsets going backwards, a topic gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.protocol.metadata import MetadataRequest

from libs.common.bus.quiet import quiet_client_logs

__all__ = ["BROKER_ERRORS", "BrokerView", "Outage", "look", "look_at"]

#: What a send, flush or look raises when the broker is away or does not answer in time: for callers that
#: may not import the driver (a service's own layers) and wait the outage out.
BROKER_ERRORS: tuple[type[BaseException], ...] = (KafkaError, OSError, TimeoutError)

#: Error code of a topic the broker does not have (UNKNOWN_TOPIC_OR_PARTITION).
_UNKNOWN_TOPIC = 3
#: Asked about when the caller names no topic: the embedded broker answers an empty list with every topic.
_NO_TOPIC = "__gpucloud.identity"


@dataclass(frozen=True, slots=True)
class BrokerView:
    """What one metadata request says: the cluster's id and which of the topics asked about it lacks."""

    cluster_id: str
    missing: frozenset[str]


async def look(client: Any, topics: Sequence[str] = ()) -> BrokerView:
    """One metadata request over ``client`` (an ``AIOKafkaClient``, e.g. ``producer.client``) that creates
    nothing: the cluster id, and the ``topics`` the broker does not have."""
    node = client.get_random_node()
    if node is None:
        raise KafkaConnectionError("no broker known to ask for metadata")
    request = MetadataRequest(list(topics) or [_NO_TOPIC], allow_auto_topic_creation=False)
    response = await client.send(node, request)
    missing = frozenset(t[1] for t in response.topics if t[0] == _UNKNOWN_TOPIC and t[1] in topics)
    return BrokerView(cluster_id=str(getattr(response, "cluster_id", None) or ""), missing=missing)


async def look_at(*, bootstrap: str, topics: Sequence[str] = (), timeout_ms: int = 3000) -> BrokerView:
    """``look`` through a client of its own, for a caller that holds none (the node agent)."""
    quiet_client_logs()
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    try:
        await client.bootstrap()
        return await look(client, topics)
    finally:
        await client.close()


class Outage:
    """One log line when something starts failing and one when it works again, not one per attempt."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since: float | None = None
        self.failures = 0  # of the ongoing outage

    @property
    def ongoing(self) -> bool:
        """Whether a failure was noted and no success since."""
        return self._since is not None

    def failed(self) -> bool:
        """Note a failure; True for the first of an outage (the one to log)."""
        if self._since is None:
            self._since, self.failures = self._clock(), 1
            return True
        self.failures += 1
        return False

    def ended(self) -> float | None:
        """Note a success; the outage's length in seconds when this ends one (the one to log), else None."""
        if self._since is None:
            return None
        lasted, self._since = self._clock() - self._since, None
        return lasted
