"""The bus's pieces for surviving a broker: health for readiness, quiet client logs, one line per outage,
the broker's identity, and which publish errors refuse a row for good."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, MessageSizeTooLargeError
from aiokafka.protocol.metadata import MetadataRequest

from libs.common.bus.health import ConsumerHealth
from libs.common.bus.incarnation import Outage, look
from libs.common.bus.quiet import RepeatFilter, quiet_client_logs
from libs.common.bus.relay import REFUSED, OutboxRelay


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_consumer_failing_longer_than_the_bound_is_stalled_until_its_next_commit() -> None:
    clock = _Clock()
    health = ConsumerHealth(clock=clock)
    health.failed("ConnectionRefusedError: the database refuses connections")
    clock.now += 5
    assert health.stalled(bound_s=10) is None  # not for long enough yet
    clock.now += 6
    assert health.stalled(bound_s=10) == (
        "not applying events for 11s: ConnectionRefusedError: the database refuses connections"
    )
    health.checked()  # a look at the log since the failure does not clear it: something failed meanwhile
    assert health.stalled(bound_s=10) is not None
    health.applied()
    assert health.stalled(bound_s=10) is None


def test_an_idle_consumer_whose_log_checks_pass_again_is_healthy_again() -> None:
    clock = _Clock()
    health = ConsumerHealth(clock=clock)
    health.failed("cannot look at the log: KafkaConnectionError")
    health.checked()  # the check that failed is the last news: still failing
    clock.now += 60
    assert health.stalled(bound_s=30) is not None
    health.checked()  # a check with no failure since: nothing to apply, and the log is fine
    assert health.stalled(bound_s=30) is None


def _record(msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("aiokafka", level, __file__, 1, msg, args, None)


def test_a_repeated_client_error_is_let_through_once_a_window_with_the_count_it_dropped() -> None:
    clock = _Clock()
    quiet = RepeatFilter(window_s=60, clock=clock)
    template = "Unable connect to node with id %s: %s"
    assert quiet.filter(_record(template, 111, "refused"))
    assert not any(quiet.filter(_record(template, 111, "refused")) for _ in range(500))
    assert quiet.filter(_record("OffsetCommit failed for group %s", "g"))  # another kind passes
    assert quiet.filter(_record(template, 111, "refused", level=logging.INFO))  # below warnings: all pass
    clock.now += 61
    again = _record(template, 111, "refused")
    assert quiet.filter(again)
    assert again.getMessage() == "Unable connect to node with id 111: refused (500 more like it in 60s)"


def test_the_client_logs_are_quieted_on_every_aiokafka_logger() -> None:
    installed = quiet_client_logs()
    assert installed is quiet_client_logs()  # one filter, installed once
    for name in ("aiokafka", "aiokafka.consumer.group_coordinator", "aiokafka.consumer.fetcher"):
        assert logging.getLogger(name).filters.count(installed) == 1


def test_an_outage_is_told_once_when_it_starts_and_once_when_it_ends() -> None:
    clock = _Clock()
    outage = Outage(clock=clock)
    assert outage.ended() is None  # nothing was failing
    assert [outage.failed() for _ in range(4)] == [True, False, False, False]
    assert (outage.ongoing, outage.failures) == (True, 4)
    clock.now += 7.5
    assert (outage.ended(), outage.ongoing) == (7.5, False)
    assert outage.failed()  # the next outage is told again


@dataclass
class _Client:
    """Answers metadata requests as a broker with the given cluster id and topics would."""

    cluster_id: str
    topics: set[str]
    asked: list[Any] = field(default_factory=list)

    def get_random_node(self) -> int | None:
        return 111

    async def send(self, node: int, request: MetadataRequest) -> Any:
        self.asked.append(request)
        names = request._topics  # what was asked about
        found: list[tuple[int, str, bool, list[Any]]] = [
            (0 if t in self.topics else 3, t, False, []) for t in names
        ]

        @dataclass
        class _Response:
            cluster_id: str
            topics: list[tuple[int, str, bool, list[Any]]]

        return _Response(self.cluster_id, found)


async def test_a_look_at_the_broker_names_its_cluster_and_the_topics_it_lacks_and_creates_none() -> None:
    client = _Client(cluster_id="gpucloud-b", topics={"t.platform.tenants"})
    view = await look(client, ["t.platform.tenants", "t.scheduler.workloads"])
    assert view.cluster_id == "gpucloud-b"
    assert view.missing == {"t.scheduler.workloads"}
    assert client.asked[0]._allow_auto_topic_creation is False

    anonymous = await look(client)  # no topic named: one that never exists is asked about, not all
    assert anonymous.missing == frozenset()
    assert len(client.asked[1]._topics) == 1
    assert client.asked[1]._topics[0] not in client.topics


async def test_a_look_without_a_known_broker_raises_what_an_unreachable_one_does() -> None:
    client = _Client(cluster_id="x", topics=set())
    client.get_random_node = lambda: None  # type: ignore[method-assign]
    with pytest.raises(KafkaConnectionError):
        await look(client)


def test_a_row_too_large_is_refused_for_good_and_a_timeout_is_not() -> None:
    assert isinstance(MessageSizeTooLargeError(), REFUSED)
    assert not isinstance(KafkaTimeoutError(), REFUSED)
    assert not isinstance(KafkaConnectionError(), REFUSED)


def test_acks_before_a_partitions_known_end_show_a_new_log_and_forget_the_old_ends() -> None:
    relay = OutboxRelay(pool=None, producer=None, service="unit", schema="unit")  # only its ack bookkeeping
    p0, p1 = TopicPartition("t", 0), TopicPartition("t", 1)
    for offset in range(10):
        relay._note_ack(p0, offset)
    relay._note_ack(p1, 4)
    before = relay._went_back
    relay._note_ack(p0, 0)  # the broker starts this partition's log again
    assert (before, relay._went_back) == (False, True)
    assert relay._ends == {p0: 1}  # p1's end belonged to the old log too
