from datetime import timedelta

import pytest

from services.billing.domain.prices import (
    PriceList,
    PriceNotFoundError,
    PricingClass,
    ResourceKey,
    RetroactivePriceError,
)
from tests.unit.billing.factories import A100, MIG_1G, T0, entry, minutes


def test_price_in_force_is_the_newest_version_covering_the_instant() -> None:
    prices = PriceList.of([entry("v1", 100, start=T0 - minutes(60)), entry("v2", 200, start=T0)])

    assert (
        prices.price_at(resource=A100, pricing_class=PricingClass.ON_DEMAND, at=T0 - minutes(1)).price_id
        == "v1"
    )
    assert prices.price_at(resource=A100, pricing_class=PricingClass.ON_DEMAND, at=T0).price_id == "v2"


def test_mig_profiles_and_pricing_classes_are_priced_separately() -> None:
    prices = PriceList.of(
        [
            entry("full", 100, start=T0),
            entry("mig", 20, start=T0, resource=MIG_1G),
            entry("spot", 30, start=T0, pricing_class=PricingClass.SPOT),
        ]
    )

    assert prices.price_at(resource=MIG_1G, pricing_class=PricingClass.ON_DEMAND, at=T0).micro_per_hour == 20
    assert prices.price_at(resource=A100, pricing_class=PricingClass.SPOT, at=T0).micro_per_hour == 30
    with pytest.raises(PriceNotFoundError):
        prices.price_at(resource=MIG_1G, pricing_class=PricingClass.RESERVED, at=T0)


def test_expired_price_is_not_found_after_effective_to() -> None:
    prices = PriceList.of([entry("v1", 100, start=T0, end=T0 + minutes(10))])

    with pytest.raises(PriceNotFoundError):
        prices.price_at(resource=A100, pricing_class=PricingClass.ON_DEMAND, at=T0 + minutes(10))


def test_segments_split_at_price_changes_and_merge_unchanged_stretches() -> None:
    prices = PriceList.of([entry("v1", 100, start=T0 - minutes(60)), entry("v2", 200, start=T0)])

    segments = prices.segments(
        resource=A100, pricing_class=PricingClass.ON_DEMAND, start=T0 - minutes(5), end=T0 + minutes(5)
    )

    assert [(s.start, s.end, s.entry.price_id) for s in segments] == [
        (T0 - minutes(5), T0, "v1"),
        (T0, T0 + minutes(5), "v2"),
    ]


def test_a_price_change_cannot_take_effect_in_the_past() -> None:
    prices = PriceList.of([entry("v1", 100, start=T0 - timedelta(days=1))])

    with pytest.raises(RetroactivePriceError):
        prices.with_entry(entry("v2", 200, start=T0 - minutes(1)), now=T0)
    assert len(prices.with_entry(entry("v2", 200, start=T0), now=T0).entries) == 2


def test_two_versions_taking_effect_at_the_same_instant_are_refused() -> None:
    with pytest.raises(ValueError, match="same instant"):
        PriceList.of([entry("a", 1, start=T0), entry("b", 2, start=T0)])


def test_resource_labels_are_stable_text() -> None:
    assert ResourceKey(gpu_model="A100", share_of=4).label() == "A100/share:4"
    assert MIG_1G.label() == "A100-80GB/mig:1g.10gb"
    with pytest.raises(ValueError, match="not both"):
        ResourceKey(gpu_model="A100", mig_profile="1g.10gb", share_of=2)
