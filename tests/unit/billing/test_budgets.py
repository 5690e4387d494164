from datetime import UTC, datetime

from services.billing.domain.budgets import Budget, BudgetState, apply_charge, month_of

MARCH = datetime(2025, 3, 10, tzinfo=UTC)
BUDGET = Budget(tenant_id="acme", project="vision", limit_micro=1_000_000)


def test_threshold_is_crossed_when_spend_reaches_its_percentage() -> None:
    state = BudgetState(month="2025-03", spent_micro=400_000)

    decision = apply_charge(budget=BUDGET, state=state, amount_micro=100_000, at=MARCH)

    assert decision.newly_crossed == (50,)
    assert decision.state.spent_micro == 500_000


def test_each_threshold_fires_once_per_month() -> None:
    first = apply_charge(budget=BUDGET, state=BudgetState(month="2025-03"), amount_micro=600_000, at=MARCH)
    second = apply_charge(budget=BUDGET, state=first.state, amount_micro=10_000, at=MARCH)

    assert first.newly_crossed == (50,)
    assert second.newly_crossed == ()


def test_one_large_charge_crosses_several_thresholds_at_once() -> None:
    decision = apply_charge(
        budget=BUDGET, state=BudgetState(month="2025-03"), amount_micro=1_200_000, at=MARCH
    )

    assert decision.newly_crossed == (50, 80, 100)


def test_a_new_month_starts_from_zero_and_can_cross_again() -> None:
    march = BudgetState(month="2025-03", spent_micro=900_000, crossed=frozenset({50, 80}))

    april = apply_charge(
        budget=BUDGET, state=march, amount_micro=500_000, at=datetime(2025, 4, 1, tzinfo=UTC)
    )

    assert april.state.month == "2025-04"
    assert april.state.spent_micro == 500_000
    assert april.newly_crossed == (50,)


def test_hard_stop_only_when_policy_asks_and_full_budget_is_spent() -> None:
    strict = Budget(tenant_id="acme", project="vision", limit_micro=1_000_000, hard_stop=True)
    state = BudgetState(month="2025-03", spent_micro=999_999)

    assert apply_charge(budget=strict, state=state, amount_micro=1, at=MARCH).hard_stop
    assert not apply_charge(budget=strict, state=state, amount_micro=0, at=MARCH).hard_stop
    assert not apply_charge(budget=BUDGET, state=state, amount_micro=1, at=MARCH).hard_stop


def test_budget_month_is_taken_in_utc() -> None:
    from datetime import timedelta, timezone

    late_march_in_new_york = datetime(2025, 3, 31, 22, tzinfo=timezone(timedelta(hours=-4)))

    assert month_of(late_march_in_new_york) == "2025-04"
