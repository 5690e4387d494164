import pytest

from services.scheduler.domain.errors import QuotaExceeded
from services.scheduler.domain.quota import (
    QuotaLimits,
    QuotaUsage,
    check,
    demand_of,
    release,
    reserve,
    to_milli,
)

LIMITS = QuotaLimits(gpus=4, units_milli=32_000, workloads=2)


def test_units_become_integer_milli_units_rounded_up() -> None:
    assert to_milli(2.0) == 2000
    assert to_milli(8 / 3) == 2667


def test_demand_within_every_limit_passes_the_check() -> None:
    assert check(limits=LIMITS, usage=QuotaUsage(), demand=demand_of(gpus=4, units=32)) == ()


def test_check_names_every_exceeded_dimension() -> None:
    usage = QuotaUsage(gpus=3, units_milli=30_000, workloads=2)
    assert check(limits=LIMITS, usage=usage, demand=demand_of(gpus=2, units=8)) == (
        "gpus",
        "units_milli",
        "workloads",
    )


def test_reserve_adds_the_demand_and_release_gives_it_back() -> None:
    demand = demand_of(gpus=2, units=16)
    held = reserve(tenant="acme", limits=LIMITS, usage=QuotaUsage(), demand=demand)
    assert held == QuotaUsage(gpus=2, units_milli=16_000, workloads=1)
    assert release(usage=held, demand=demand) == QuotaUsage()


def test_reserve_over_a_limit_raises_and_names_it() -> None:
    with pytest.raises(QuotaExceeded) as err:
        reserve(
            tenant="acme", limits=LIMITS, usage=QuotaUsage(workloads=2), demand=demand_of(gpus=1, units=8)
        )
    assert err.value.exceeded == ("workloads",)


def test_release_never_goes_below_zero() -> None:
    assert release(usage=QuotaUsage(gpus=1), demand=demand_of(gpus=3, units=1)) == QuotaUsage()


def test_unset_limits_are_unlimited() -> None:
    assert (
        check(limits=QuotaLimits(), usage=QuotaUsage(gpus=10**6), demand=demand_of(gpus=10**6, units=1)) == ()
    )
