from datetime import timedelta

import pytest

from services.billing.domain.ledger import JournalEntry, post_charge, reverse
from services.billing.domain.rating import EndReason, rate
from services.billing.domain.reconciliation import FactKind, LifecycleFact, allocations_from_facts, reconcile
from tests.unit.billing.factories import T0, allocation, flat_prices, minutes

AS_OF = T0 + minutes(10)


def _facts() -> list[LifecycleFact]:
    first, second = allocation("a1"), allocation("a2", project="nlp", started_at=T0 + minutes(1))
    return [
        LifecycleFact(kind=FactKind.PLACED, allocation_id="a1", at=T0, allocation=first),
        LifecycleFact(
            kind=FactKind.RUNNING, allocation_id="a1", at=T0 + timedelta(seconds=5), allocation=first
        ),
        LifecycleFact(
            kind=FactKind.ENDED, allocation_id="a1", at=T0 + minutes(3), end_reason=EndReason.FAILED
        ),
        LifecycleFact(kind=FactKind.RUNNING, allocation_id="a2", at=T0 + minutes(1), allocation=second),
    ]


def _ledger_by_accrual() -> list[JournalEntry]:
    """What the service would have posted: accrual every few minutes, then the end."""
    prices, entries = flat_prices(), list[JournalEntry]()
    for alloc in allocations_from_facts(_facts()):
        rated_until = None
        for now in (T0 + minutes(2.5), T0 + minutes(6), AS_OF):
            result = rate(allocation=alloc, rated_until=rated_until, now=now, prices=prices)
            entries += [post_charge(line) for line in result.lines]
            rated_until = result.rated_until
    return entries


def test_ledger_built_by_accrual_equals_usage_recomputed_from_facts() -> None:
    result = reconcile(facts=_facts(), prices=flat_prices(), entries=_ledger_by_accrual(), as_of=AS_OF)

    assert result.equal
    assert result.differences == ()


def test_a_missing_charge_is_reported_per_project_and_by_key() -> None:
    entries = _ledger_by_accrual()
    dropped = entries.pop()

    result = reconcile(facts=_facts(), prices=flat_prices(), entries=entries, as_of=AS_OF)

    assert not result.equal
    assert result.missing_keys == (dropped.source_event_id,)
    assert [(d.project, d.expected_micro - d.ledger_micro) for d in result.differences] == [("nlp", 60_000)]


def test_a_reversed_charge_without_replacement_shows_as_a_difference() -> None:
    entries = _ledger_by_accrual()
    entries.append(reverse(entries[0], reason="mistake", at=AS_OF))

    result = reconcile(facts=_facts(), prices=flat_prices(), entries=entries, as_of=AS_OF)

    assert result.missing_keys == (entries[0].source_event_id,)
    assert result.differences[0].ledger_micro == result.differences[0].expected_micro - 60_000


def test_facts_in_any_order_and_redelivered_fold_to_the_same_allocations() -> None:
    facts = _facts()

    assert allocations_from_facts([*reversed(facts), *facts]) == allocations_from_facts(facts)
    assert allocations_from_facts(facts)[0].ended_at == T0 + minutes(3)


def test_an_allocation_known_only_from_its_end_is_an_error() -> None:
    with pytest.raises(ValueError, match="no placed or running fact"):
        allocations_from_facts([_facts()[2]])
