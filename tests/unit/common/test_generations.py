"""Topic generations: which topic a record goes to, what a reader matches, what the keeper may delete."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from libs.common.bus.generations import Generations, generations_of, live_topics
from libs.common.events import topics
from libs.common.settings import BaseServiceSettings

BASE = "p.telemetry.samples"


def test_a_record_goes_to_the_generation_its_time_falls_in_and_the_next_exists_ahead() -> None:
    g = Generations(base=BASE, every_s=300)

    assert [g.topic_at(t) for t in (900, 1199.9, 1200)] == [f"{BASE}.900", f"{BASE}.900", f"{BASE}.1200"]
    assert g.live(1000) == [f"{BASE}.900", f"{BASE}.1200"]
    assert g.started(f"{BASE}.900") == 900


def test_readers_match_every_generation_and_the_topic_itself_but_not_its_neighbours() -> None:
    pattern = re.compile(Generations(base=BASE, every_s=300).pattern())
    names = [f"{BASE}.900", BASE, f"{BASE}.dlq", f"{BASE}x", f"q{BASE}.900", "p.other.900", f"{BASE}.9.1"]

    assert [n for n in names if pattern.match(n)] == [f"{BASE}.900", BASE]


def test_only_generations_older_than_the_kept_ones_are_expired() -> None:
    g = Generations(base=BASE, every_s=300, keep=1)
    names = [f"{BASE}.{s}" for s in (0, 300, 600, 900, 1200)] + [BASE, f"{BASE}.dlq", "other.0"]

    assert g.older(names, 1000, than=g.keep + 1) == [f"{BASE}.0", f"{BASE}.300"]  # 600 kept, 900 current
    assert g.older(names, 1000, than=4) == []
    assert Generations(base=BASE, every_s=300, keep=0).older(names, 1000, than=1) == [
        f"{BASE}.0",
        f"{BASE}.300",
        f"{BASE}.600",
    ]


def test_without_generations_the_topic_is_written_itself() -> None:
    g = Generations(base=BASE, every_s=0)

    assert (g.rolling, g.topic_at(1000), g.live(1000)) == (False, BASE, [BASE])
    assert g.started(f"{BASE}.900") is None
    with pytest.raises(ValueError, match="every_s and keep"):
        Generations(base=BASE, every_s=-1)


def test_settings_roll_only_the_topics_that_need_no_history() -> None:
    s = BaseServiceSettings(kafka_topic_prefix="p.", kafka_generation_s=60)

    assert generations_of(s, topics.TELEMETRY_SAMPLES) == Generations(base=BASE, every_s=60)
    assert not generations_of(s, topics.TELEMETRY_ROLLUPS).rolling
    assert live_topics(s, 130) == [f"{BASE}.120", f"{BASE}.180"]
    assert live_topics(BaseServiceSettings(kafka_topic_prefix="p.", kafka_generation_s=0), 130) == [BASE]


@pytest.mark.parametrize("seconds", [1, 9, -1])
def test_a_generation_shorter_than_a_rebalance_is_refused_by_name(seconds: int) -> None:
    with pytest.raises(ValidationError, match=r"KAFKA_GENERATION_S|greater than or equal"):
        BaseServiceSettings(kafka_generation_s=seconds)
