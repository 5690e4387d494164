from datetime import datetime, timedelta

import pytest

from services.billing.domain.ledger import (
    JournalEntry,
    Posting,
    UnbalancedEntryError,
    balances,
    ledger_rows,
    post_charge,
    post_charges,
    receivable_totals,
    reverse,
    unseen,
)
from services.billing.domain.rating import ChargeLine, EndReason, close, rate
from tests.unit.billing.factories import T0, allocation, flat_prices, minutes


def _charges(n: int = 3) -> tuple[ChargeLine, ...]:
    return rate(allocation=allocation(), rated_until=None, now=T0 + minutes(n), prices=flat_prices()).lines


def _entry(postings: tuple[Posting, ...]) -> JournalEntry:
    return JournalEntry(
        entry_id="e1",
        source_event_id="s1",
        at=T0,
        description="manual",
        tenant_id="acme",
        project="vision",
        postings=postings,
    )


def test_a_charge_debits_the_tenant_project_and_credits_revenue_for_its_class() -> None:
    entry = post_charge(_charges(1)[0])

    assert entry.postings == (
        Posting(account="tenant:acme:project:vision", debit_micro=60_000),
        Posting(account="revenue:on_demand", credit_micro=60_000),
    )
    assert entry.source_event_id == _charges(1)[0].key


def test_posting_many_charges_gives_the_entries_of_posting_each_alone() -> None:
    lines = rate(
        allocation=close(
            allocation(started_at=T0 + timedelta(seconds=20)),
            at=T0 + minutes(4.5),
            reason=EndReason.COMPLETED,
        ),
        rated_until=None,
        now=T0 + minutes(9),
        prices=flat_prices(),
    ).lines

    assert post_charges(lines) == [post_charge(line) for line in lines]
    assert len({entry.postings for entry in post_charges(lines)}) == 3  # 40 s, 60 s and 30 s lines


def test_the_whole_ledger_balances_to_zero() -> None:
    entries = [post_charge(line) for line in _charges(5)]

    totals = balances(entries)

    assert sum(totals.values()) == 0
    assert totals["tenant:acme:project:vision"] == 300_000
    assert totals["revenue:on_demand"] == -300_000


def test_unbalanced_entries_are_refused() -> None:
    with pytest.raises(UnbalancedEntryError, match="debits 10 != credits 9"):
        _entry((Posting(account="a", debit_micro=10), Posting(account="b", credit_micro=9)))


def test_postings_must_be_one_sided_and_non_negative() -> None:
    with pytest.raises(UnbalancedEntryError, match="one-sided"):
        _entry((Posting(account="a", debit_micro=5, credit_micro=5), Posting(account="b")))
    with pytest.raises(UnbalancedEntryError, match="one-sided"):
        _entry((Posting(account="a", debit_micro=-5), Posting(account="b", credit_micro=-5)))


def test_reversal_is_a_new_entry_that_cancels_the_original() -> None:
    original = post_charge(_charges(1)[0])
    correction_time = datetime(2025, 3, 2, tzinfo=T0.tzinfo)

    reversal = reverse(original, reason="duplicate workload", at=correction_time)

    assert reversal.entry_id != original.entry_id
    assert reversal.reverses_entry_id == original.entry_id
    assert reversal.at == correction_time
    assert balances([original, reversal]) == {"tenant:acme:project:vision": 0, "revenue:on_demand": 0}


def test_a_reversal_cannot_itself_be_reversed() -> None:
    reversal = reverse(post_charge(_charges(1)[0]), reason="x", at=T0)

    with pytest.raises(ValueError, match="reversing a reversal"):
        reverse(reversal, reason="y", at=T0)


def test_redelivered_charges_are_posted_only_once() -> None:
    entries = [post_charge(line) for line in _charges(3)]
    already = {entries[0].source_event_id}

    fresh = unseen([*entries, *entries], seen=already)

    assert [e.entry_id for e in fresh] == [e.entry_id for e in entries[1:]]


def test_receivable_totals_are_per_tenant_project_and_include_reversals() -> None:
    entries = [post_charge(line) for line in _charges(3)]
    entries.append(reverse(entries[0], reason="refund", at=T0 + minutes(10)))

    assert receivable_totals(entries) == {("acme", "vision"): 120_000}


def test_ledger_rows_flatten_each_posting_with_its_entry() -> None:
    rows = list(ledger_rows([post_charge(line) for line in _charges(2)]))

    assert len(rows) == 4
    assert sum(r.debit_micro for r in rows) == sum(r.credit_micro for r in rows) == 120_000
    assert {r.account for r in rows} == {"tenant:acme:project:vision", "revenue:on_demand"}
