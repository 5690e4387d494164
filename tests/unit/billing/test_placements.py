from decimal import Decimal

import pytest

from services.billing.domain.placements import DEFAULT_RESOURCE, HeldDevice, Placement, allocations_for
from services.billing.domain.prices import PriceList, PriceNotFoundError, PricingClass, ResourceKey
from tests.unit.billing.factories import MIG_1G, T0, entry


def _placement(*devices: HeldDevice, tags: dict[str, str] | None = None) -> Placement:
    return Placement(
        placement_id="pl-1",
        workload_id="wl-1",
        tenant_id="acme",
        pricing_class=PricingClass.ON_DEMAND,
        tags=tags if tags is not None else {"project": "vision"},
        devices=devices,
    )


PRICES = PriceList.of(
    [
        entry("a100", 3_600_000, start=T0),
        entry("mig", 500_000, start=T0, resource=MIG_1G),
        entry("default", 9_000_000, start=T0, resource=DEFAULT_RESOURCE),
    ]
)


def test_devices_of_one_model_become_one_allocation_holding_all_their_units() -> None:
    a100 = HeldDevice(model="A100-80GB", units=Decimal(8))
    [allocation] = allocations_for(placement=_placement(a100, a100), prices=PRICES, at=T0)
    assert allocation.allocation_id == "pl-1/A100-80GB"
    # Decimal equals int at runtime; mypy's strict equality does not know that.
    assert (allocation.gpus, allocation.compute_units, allocation.project) == (2, 16, "vision")  # type: ignore[comparison-overlap]


def test_a_priced_mig_profile_wins_over_its_model_and_an_unknown_model_pays_the_default() -> None:
    mig = HeldDevice(model="A100-80GB", units=Decimal(1), profile="1g.10gb")
    odd = HeldDevice(model="Z9000", units=Decimal(2))
    resources = {a.resource for a in allocations_for(placement=_placement(mig, odd), prices=PRICES, at=T0)}
    assert resources == {MIG_1G, DEFAULT_RESOURCE}


def test_an_unpriced_profile_falls_back_to_its_model_and_a_missing_project_is_untagged() -> None:
    mig = HeldDevice(model="A100-80GB", units=Decimal(2), profile="3g.40gb")
    [allocation] = allocations_for(placement=_placement(mig, tags={}), prices=PRICES, at=T0)
    assert allocation.resource == ResourceKey(gpu_model="A100-80GB")
    assert allocation.project == "(untagged)"


def test_without_even_a_default_price_placement_is_refused_rather_than_free() -> None:
    prices = PriceList.of([entry("a100", 3_600_000, start=T0)])
    with pytest.raises(PriceNotFoundError):
        allocations_for(
            placement=_placement(HeldDevice(model="Z9000", units=Decimal(1))), prices=prices, at=T0
        )
