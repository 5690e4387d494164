from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from services.billing.domain.fairshare import DecayedUsage, accrue, decay_factor, decayed_usage
from services.billing.domain.rating import ChargeLine, EndReason, close, rate
from tests.unit.billing.factories import T0, allocation, flat_prices, minutes

WEEK = timedelta(days=7)


def _hour_of(tenant_id: str) -> list[ChargeLine]:
    alloc = close(
        allocation(tenant_id=tenant_id, compute_units="8"), at=T0 + minutes(60), reason=EndReason.COMPLETED
    )
    return list(
        rate(
            allocation=alloc,
            rated_until=None,
            now=T0 + minutes(60),
            prices=flat_prices(),
            interval=minutes(60),
        ).lines
    )


def test_usage_halves_after_one_half_life() -> None:
    assert decay_factor(age=WEEK) == Decimal("0.5")
    assert decay_factor(age=2 * WEEK) == Decimal("0.25")
    assert decay_factor(age=timedelta(0)) == Decimal(1)


def test_decayed_usage_is_compute_unit_hours_per_tenant() -> None:
    lines = _hour_of("acme") + _hour_of("globex")
    end = T0 + minutes(60)

    assert decayed_usage(lines, now=end) == {"acme": Decimal("8.000000"), "globex": Decimal("8.000000")}
    assert decayed_usage(lines, now=end + WEEK)["acme"] == Decimal("4.000000")


def test_future_dated_usage_is_not_amplified() -> None:
    assert decayed_usage(_hour_of("acme"), now=T0)["acme"] == Decimal("8.000000")


def test_running_value_accrued_incrementally_matches_the_full_recomputation() -> None:
    first, later = (
        _hour_of("acme"),
        [replace(line, period_end=line.period_end + WEEK) for line in _hour_of("acme")],
    )
    start = DecayedUsage(tenant_id="acme", value=Decimal(0), as_of=T0)

    step1 = accrue(start, lines=first, now=T0 + minutes(60))
    step2 = accrue(step1, lines=later, now=T0 + minutes(60) + 2 * WEEK)

    assert step2.value == decayed_usage(first + later, now=T0 + minutes(60) + 2 * WEEK)["acme"]
    assert step2.value == Decimal("6.000000")
