import random
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from services.billing.domain.prices import PriceBasis, PriceList
from services.billing.domain.rating import (
    Allocation,
    ChargeLine,
    EndReason,
    charge_key,
    close,
    floor_to_grid,
    migrate,
    rate,
)
from tests.unit.billing.factories import T0, allocation, entry, flat_prices, minutes


def test_open_allocation_accrues_one_line_per_minute_up_to_the_last_tick() -> None:
    result = rate(allocation=allocation(), rated_until=None, now=T0 + minutes(5.5), prices=flat_prices())

    assert [line.amount_micro for line in result.lines] == [60_000] * 5
    assert result.rated_until == T0 + minutes(5)


def test_accruing_in_several_calls_yields_exactly_the_lines_of_one_call() -> None:
    alloc, prices = allocation(started_at=T0 + timedelta(seconds=20)), flat_prices()
    first = rate(allocation=alloc, rated_until=None, now=T0 + minutes(2.5), prices=prices)
    second = rate(allocation=alloc, rated_until=first.rated_until, now=T0 + minutes(7), prices=prices)
    whole = rate(allocation=alloc, rated_until=None, now=T0 + minutes(7), prices=prices)

    assert first.lines + second.lines == whole.lines
    assert len({line.key for line in whole.lines}) == len(whole.lines)


def test_rating_an_already_rated_period_charges_nothing() -> None:
    alloc, prices = allocation(), flat_prices()
    done = rate(allocation=alloc, rated_until=None, now=T0 + minutes(3), prices=prices)

    again = rate(allocation=alloc, rated_until=done.rated_until, now=T0 + minutes(3.9), prices=prices)

    assert again.lines == ()
    assert again.rated_until == done.rated_until


def test_ended_allocation_is_charged_to_its_exact_end_including_partial_minutes() -> None:
    alloc = close(
        allocation(started_at=T0 + timedelta(seconds=30)),
        at=T0 + minutes(2) + timedelta(seconds=10),
        reason=EndReason.COMPLETED,
    )

    result = rate(allocation=alloc, rated_until=None, now=T0 + minutes(10), prices=flat_prices())

    assert [line.amount_micro for line in result.lines] == [30_000, 60_000, 10_000]
    assert result.rated_until == alloc.ended_at


def test_price_change_mid_allocation_splits_the_minute_and_charges_each_part_at_its_price() -> None:
    prices = PriceList.of(
        [
            entry("v1", 3_600_000, start=T0 - timedelta(days=1)),
            entry("v2", 7_200_000, start=T0 + timedelta(minutes=1, seconds=30)),
        ]
    )

    lines = rate(allocation=allocation(), rated_until=None, now=T0 + minutes(3), prices=prices).lines

    assert [(line.price_id, line.amount_micro) for line in lines] == [
        ("v1", 60_000),
        ("v1", 30_000),
        ("v2", 60_000),
        ("v2", 120_000),
    ]


def test_a_later_price_change_does_not_alter_lines_already_rated() -> None:
    alloc, prices = allocation(), flat_prices()
    before = rate(allocation=alloc, rated_until=None, now=T0 + minutes(3), prices=prices).lines

    changed = prices.with_entry(entry("v2", 9_999_999, start=T0 + minutes(3)), now=T0 + minutes(3))
    recomputed = rate(allocation=alloc, rated_until=None, now=T0 + minutes(3), prices=changed).lines

    assert recomputed == before


def test_preempted_allocation_stops_accruing_at_preemption() -> None:
    alloc = close(allocation(), at=T0 + minutes(2), reason=EndReason.PREEMPTED)

    result = rate(allocation=alloc, rated_until=None, now=T0 + minutes(30), prices=flat_prices())

    assert sum(line.amount_micro for line in result.lines) == 120_000
    assert max(line.period_end for line in result.lines) == T0 + minutes(2)


def test_migration_closes_one_charge_and_opens_the_next_with_no_gap_or_overlap() -> None:
    at = T0 + timedelta(minutes=1, seconds=15)
    closed, opened = migrate(allocation(), at=at, new_allocation_id="alloc-2", gpus=Decimal(2))
    prices = flat_prices()

    old = rate(allocation=closed, rated_until=None, now=T0 + minutes(3), prices=prices).lines
    new = rate(allocation=opened, rated_until=None, now=T0 + minutes(3), prices=prices).lines

    assert closed.end_reason is EndReason.MIGRATED
    assert old[-1].period_end == new[0].period_start == at
    assert [ln.amount_micro for ln in old] == [60_000, 15_000]
    assert [ln.amount_micro for ln in new] == [90_000, 120_000]  # two GPUs after the move


def test_idempotency_key_names_allocation_and_period() -> None:
    line = rate(allocation=allocation(), rated_until=None, now=T0 + minutes(1), prices=flat_prices()).lines[0]

    assert line.key == charge_key(allocation_id="alloc-1", start=T0, end=T0 + minutes(1))
    assert line.key == "alloc-1|2025-03-01T12:00:00+00:00|2025-03-01T12:01:00+00:00"


def test_amounts_round_half_even_once_per_line() -> None:
    prices = flat_prices(micro_per_hour=120)  # 2 micro a minute: 15 s is 0.5, 45 s is 1.5
    short = close(allocation(), at=T0 + timedelta(seconds=15), reason=EndReason.COMPLETED)
    longer = replace(short, ended_at=T0 + timedelta(seconds=45))

    assert (
        rate(allocation=short, rated_until=None, now=T0 + minutes(1), prices=prices).lines[0].amount_micro
        == 0
    )
    assert (
        rate(allocation=longer, rated_until=None, now=T0 + minutes(1), prices=prices).lines[0].amount_micro
        == 2
    )


def test_compute_unit_prices_multiply_compute_units_not_gpus() -> None:
    prices = PriceList.of([entry("cu", 600_000, start=T0, basis=PriceBasis.COMPUTE_UNIT_HOUR)])
    alloc = close(allocation(compute_units="4", gpus="0.5"), at=T0 + minutes(30), reason=EndReason.COMPLETED)

    lines = rate(
        allocation=alloc, rated_until=None, now=T0 + minutes(30), prices=prices, interval=minutes(30)
    ).lines

    assert lines[0].amount_micro == 1_200_000
    assert lines[0].quantity_hours == lines[0].compute_unit_hours == Decimal("2.000000000")


def test_grid_is_aligned_to_whole_intervals() -> None:
    assert floor_to_grid(T0 + timedelta(seconds=59)) == T0
    assert floor_to_grid(T0 + minutes(7), interval=minutes(5)) == T0 + minutes(5)


def _reference_lines(
    alloc: Allocation, *, lower: datetime, upper: datetime, prices: PriceList
) -> list[ChargeLine]:
    """The rule written out line by line, with exact fractions: the fast path must produce exactly this."""
    lines = []
    for seg in prices.segments(
        resource=alloc.resource, pricing_class=alloc.pricing_class, start=lower, end=upper
    ):
        cursor = seg.start
        while cursor < seg.end:
            nxt = min(floor_to_grid(cursor, interval=GRID) + GRID, seg.end)
            hours = Fraction((nxt - cursor) // timedelta(microseconds=1), 3_600_000_000)
            units = alloc.gpus if seg.entry.basis is PriceBasis.GPU_HOUR else alloc.compute_units
            quantity = Fraction(units) * hours
            lines.append(
                ChargeLine(
                    key=charge_key(allocation_id=alloc.allocation_id, start=cursor, end=nxt),
                    allocation_id=alloc.allocation_id,
                    workload_id=alloc.workload_id,
                    tenant_id=alloc.tenant_id,
                    project=alloc.project,
                    tags=dict(alloc.tags),
                    resource=alloc.resource,
                    pricing_class=alloc.pricing_class,
                    period_start=cursor,
                    period_end=nxt,
                    basis=seg.entry.basis,
                    quantity_hours=Decimal(round(quantity * 10**9)).scaleb(-9),
                    compute_unit_hours=Decimal(round(Fraction(alloc.compute_units) * hours * 10**9)).scaleb(
                        -9
                    ),
                    price_id=seg.entry.price_id,
                    micro_per_hour=seg.entry.micro_per_hour,
                    amount_micro=round(quantity * seg.entry.micro_per_hour),
                )
            )
            cursor = nxt
    return lines


GRID = minutes(1)


def test_rated_lines_equal_the_rule_computed_line_by_line_for_random_allocations_and_price_changes() -> None:
    rng = random.Random(7)
    for _ in range(200):
        changes = sorted(
            {
                T0 + timedelta(seconds=rng.randrange(1, 4 * 3600), microseconds=rng.randrange(10**6))
                for _ in range(rng.randrange(4))
            }
        )
        basis = rng.choice(list(PriceBasis))
        prices = PriceList.of(
            [entry("v0", rng.randrange(1, 9_000_000), start=T0 - timedelta(days=1), basis=basis)]
            + [
                entry(f"v{n + 1}", rng.randrange(0, 9_000_000), start=at, basis=basis)
                for n, at in enumerate(changes)
            ]
        )
        start = T0 + timedelta(
            seconds=rng.randrange(3600), microseconds=rng.choice([0, rng.randrange(10**6)])
        )
        end = start + timedelta(
            seconds=rng.randrange(1, 3 * 3600), microseconds=rng.choice([0, rng.randrange(10**6)])
        )
        alloc = close(
            allocation(
                started_at=start,
                gpus=rng.choice(["1", "0.5", "2", "0.125"]),
                compute_units=rng.choice(["8", "1", "3", "0.5", "16"]),
                tags={"project": "vision"},
            ),
            at=end,
            reason=EndReason.COMPLETED,
        )
        lower = start if rng.random() < 0.5 else floor_to_grid(start + (end - start) / 3)
        lower = max(lower, start)

        result = rate(allocation=alloc, rated_until=lower, now=end + minutes(5), prices=prices)

        assert list(result.lines) == _reference_lines(alloc, lower=lower, upper=end, prices=prices)
        assert all(line.tags == {"project": "vision"} for line in result.lines)
