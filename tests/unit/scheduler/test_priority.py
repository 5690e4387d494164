from datetime import timedelta

import pytest

from services.scheduler.domain.priority import (
    DecayedUsage,
    UsageRecord,
    accrue,
    decayed_usage,
    entitlement,
    explain,
    fair_share,
    priority,
    usage_at,
)
from tests.unit.scheduler.builders import NOW


def test_priority_follows_the_articles_weights() -> None:
    assert priority(urgency=0.5, fair_share=0.25) == pytest.approx(0.6 * 0.5 + 0.4 * 0.75)


def test_priority_is_clamped_to_one_for_urgent_work_of_an_idle_tenant() -> None:
    assert priority(urgency=1.0, fair_share=0.0) == 1.0
    assert priority(urgency=7.0, fair_share=-3.0) == 1.0


def test_out_of_range_fair_share_is_clamped_before_weighting() -> None:
    assert priority(urgency=0.0, fair_share=2.5) == 0.0


def test_tenant_that_used_less_gets_the_higher_priority() -> None:
    assert priority(urgency=0.5, fair_share=0.1) > priority(urgency=0.5, fair_share=0.9)


def test_usage_halves_after_one_half_life() -> None:
    records = [UsageRecord(amount=100.0, at=NOW)]
    assert decayed_usage(records, at=NOW + timedelta(days=7)) == pytest.approx(50.0)
    assert decayed_usage(records, at=NOW + timedelta(days=14)) == pytest.approx(25.0)


def test_half_life_is_configurable() -> None:
    records = [UsageRecord(amount=8.0, at=NOW)]
    assert decayed_usage(records, at=NOW + timedelta(days=3), half_life=timedelta(days=1)) == pytest.approx(
        1.0
    )


def test_incremental_accumulator_matches_summing_records() -> None:
    records = [UsageRecord(amount=float(i + 1), at=NOW + timedelta(hours=5 * i)) for i in range(10)]
    acc = DecayedUsage(value=0.0, as_of=NOW)
    for r in records:
        acc = accrue(acc, amount=r.amount, at=r.at)
    later = NOW + timedelta(days=3)
    assert usage_at(acc, at=later) == pytest.approx(decayed_usage(records, at=later))


def test_late_record_does_not_rewind_the_accumulator() -> None:
    acc = DecayedUsage(value=10.0, as_of=NOW + timedelta(days=7))
    after = accrue(acc, amount=4.0, at=NOW)
    assert after.as_of == acc.as_of
    assert after.value == pytest.approx(12.0)


def test_fair_share_is_usage_over_entitlement_clamped_to_one() -> None:
    assert fair_share(decayed=50.0, entitled=200.0) == pytest.approx(0.25)
    assert fair_share(decayed=500.0, entitled=200.0) == 1.0
    assert fair_share(decayed=5.0, entitled=0.0) == 1.0


def test_entitlement_is_share_of_capacity_over_the_decay_window() -> None:
    one = entitlement(shares=1, total_shares=2, capacity_units=100, half_life=timedelta(hours=1))
    two = entitlement(shares=2, total_shares=2, capacity_units=100, half_life=timedelta(hours=1))
    assert two == pytest.approx(2 * one)
    assert one == pytest.approx(50 / 0.6931471805599453)


def test_explain_lists_every_term_and_they_add_up() -> None:
    why = explain(urgency=0.8, decayed=30.0, entitled=120.0)
    assert why.fair_share == pytest.approx(0.25)
    assert why.urgency_term == pytest.approx(0.48)
    assert why.fair_share_term == pytest.approx(0.3)
    assert why.priority == pytest.approx(why.urgency_term + why.fair_share_term)
