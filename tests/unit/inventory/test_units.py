from __future__ import annotations

import math
from decimal import Decimal

import pytest

from services.inventory.domain.catalog import Catalog
from services.inventory.domain.units import (
    UnitBasis,
    gpu_units,
    mig_profile_units,
    time_slice_share_units,
    unit_table,
)

CENT = Decimal("0.01")


def test_the_reference_gpu_is_worth_exactly_eight_units(catalog: Catalog) -> None:
    assert gpu_units(model="A100-80GB", catalog=catalog) == Decimal("8.00")


def test_a_model_is_the_geometric_mean_of_its_tflops_and_bandwidth_ratios(catalog: Catalog) -> None:
    h100, ref = catalog.get("H100-80GB-SXM"), catalog.get("A100-80GB")
    ratio = float(h100.dense_16bit_tflops / ref.dense_16bit_tflops)
    bandwidth = float(h100.memory_bandwidth_gbps / ref.memory_bandwidth_gbps)
    expected = 8 * math.sqrt(ratio * bandwidth)
    assert abs(float(gpu_units(model=h100.name, catalog=catalog)) - expected) < 0.01


def test_faster_models_are_worth_more_units(catalog: Catalog) -> None:
    order = ["T4", "A10", "A100-40GB", "A100-80GB", "H100-80GB-PCIe", "H100-80GB-SXM", "H200-141GB"]
    values = [gpu_units(model=m, catalog=catalog) for m in order]
    assert values == sorted(values)
    assert len(set(values)) == len(values)


def test_the_reference_model_is_configurable(catalog: Catalog) -> None:
    basis = UnitBasis(reference_model="H100-80GB-SXM", units_per_reference=10)
    assert gpu_units(model="H100-80GB-SXM", catalog=catalog, basis=basis) == Decimal("10.00")
    assert gpu_units(model="A100-80GB", catalog=catalog, basis=basis) < Decimal(10)


def test_compute_weight_one_counts_tflops_only(catalog: Catalog) -> None:
    basis = UnitBasis(compute_weight=Decimal(1))
    a100_40 = catalog.get("A100-40GB")
    # Same tensor TFLOPS as the reference, so bandwidth no longer matters.
    assert a100_40.dense_16bit_tflops == catalog.get("A100-80GB").dense_16bit_tflops
    assert gpu_units(model=a100_40.name, catalog=catalog, basis=basis) == Decimal("8.00")


def test_every_published_value_has_exactly_two_decimals(catalog: Catalog) -> None:
    for value in unit_table(catalog=catalog):
        assert value.units == value.units.quantize(CENT)
        assert value.units.as_tuple().exponent == -2


def test_unit_table_covers_every_model_and_mig_profile(catalog: Catalog) -> None:
    table = {(v.model, v.profile) for v in unit_table(catalog=catalog)}
    for model in catalog.models:
        assert (model.name, None) in table
        assert {(model.name, p.name) for p in model.mig_profiles} <= table


@pytest.mark.parametrize("model", ["A100-40GB", "A100-80GB", "H100-80GB-SXM", "H200-141GB"])
def test_mig_units_grow_with_slices_and_the_full_profile_equals_the_gpu(catalog: Catalog, model: str) -> None:
    spec = catalog.get(model)
    units = {
        p.name: mig_profile_units(model=model, profile=p.name, catalog=catalog) for p in spec.mig_profiles
    }
    by_size = sorted(spec.mig_profiles, key=lambda p: (p.compute_slices, p.memory_slices))
    assert [units[p.name] for p in by_size] == sorted(units.values())
    assert units[by_size[-1].name] == gpu_units(model=model, catalog=catalog)


def test_seven_smallest_instances_never_add_up_to_more_than_the_gpu(catalog: Catalog) -> None:
    smallest = mig_profile_units(model="A100-80GB", profile="1g.10gb", catalog=catalog)
    assert 7 * smallest <= gpu_units(model="A100-80GB", catalog=catalog)


@pytest.mark.parametrize("ratio", [1, 2, 3, 4, 7, 16])
def test_time_sliced_shares_never_exceed_the_gpu_and_lose_under_a_cent_each(
    catalog: Catalog, ratio: int
) -> None:
    whole = gpu_units(model="H100-80GB-SXM", catalog=catalog)
    share = time_slice_share_units(gpu_units=whole, ratio=ratio)
    assert share * ratio <= whole
    assert whole - share * ratio < CENT * ratio


def test_a_zero_ratio_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        time_slice_share_units(gpu_units=Decimal(8), ratio=0)
