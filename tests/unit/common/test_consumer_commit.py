"""A commit the group refuses because it forgot this member is a stuck commit to retry, not a crash."""

from __future__ import annotations

from typing import Any, cast

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import (
    CommitFailedError,
    IllegalGenerationError,
    KafkaError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

from libs.common.bus import consumer as consumer_module
from libs.common.bus.consumer import ConsumerRunner
from libs.common.bus.handlers import Handlers


class _RefusingConsumer:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        raise self.error


def _runner(error: BaseException) -> ConsumerRunner:
    return ConsumerRunner(
        name="t",
        service="t",
        consumer=cast(Any, _RefusingConsumer(error)),
        producer=cast(Any, None),
        uow_factory=cast(Any, None),
        handlers=Handlers(deps=None),
    )


@pytest.mark.parametrize(
    "error",
    [UnknownMemberIdError(), IllegalGenerationError(), RebalanceInProgressError(), CommitFailedError("gone")],
    ids=lambda e: type(e).__name__,
)
async def test_a_commit_refused_for_a_forgotten_member_is_stuck_and_not_raised(error: KafkaError) -> None:
    runner = _runner(error)
    with pytest.raises(consumer_module._CommitStuck):
        await runner._commit({TopicPartition("t", 0): 5})
    assert "rejoining the group" in (runner.health.error or "")


async def test_another_commit_error_still_raises() -> None:
    runner = _runner(KafkaError("broken"))
    with pytest.raises(KafkaError):
        await runner._commit({TopicPartition("t", 0): 5})
