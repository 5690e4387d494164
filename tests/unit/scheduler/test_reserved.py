import pytest

from services.scheduler.domain.reserved import (
    PoolLoad,
    ReservedPoolConfig,
    admits,
    high_headroom,
    is_contended,
)

CONFIG = ReservedPoolConfig()


def load(*, held: float = 0, high_held: float = 0, waiting: float = 0, low_waiting: float = 0) -> PoolLoad:
    return PoolLoad(capacity=100, held=held, high_held=high_held, waiting=waiting, low_waiting=low_waiting)


def test_without_contention_high_priority_work_may_take_everything() -> None:
    quiet = load(held=90, high_held=90, waiting=10)
    assert admits(priority=0.9, units=10, load=quiet, config=CONFIG)


def test_under_contention_high_priority_work_stops_at_eighty_percent() -> None:
    busy = load(held=70, high_held=70, waiting=60, low_waiting=30)
    assert admits(priority=0.9, units=10, load=busy, config=CONFIG)
    assert not admits(priority=0.9, units=11, load=busy, config=CONFIG)


def test_low_priority_work_is_never_capped() -> None:
    busy = load(held=80, high_held=80, waiting=60, low_waiting=60)
    assert admits(priority=0.2, units=20, load=busy, config=CONFIG)


def test_demand_over_capacity_without_low_work_waiting_is_not_contention() -> None:
    assert not is_contended(load(held=100, high_held=100, waiting=50, low_waiting=0))
    assert high_headroom(load(held=100, high_held=100, waiting=50), config=CONFIG) == float("inf")


def test_threshold_and_cap_are_configurable() -> None:
    strict = ReservedPoolConfig(high_threshold=0.9, high_cap=0.5)
    busy = load(held=50, high_held=50, waiting=60, low_waiting=30)
    assert admits(priority=0.8, units=40, load=busy, config=strict)  # 0.8 is low under this threshold
    assert not admits(priority=0.95, units=1, load=busy, config=strict)


def test_config_refuses_fractions_outside_zero_one() -> None:
    with pytest.raises(ValueError, match="lie in"):
        ReservedPoolConfig(high_cap=1.5)
