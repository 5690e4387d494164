"""Compute units: the one number users, quotas and bills count GPU capacity in.

Formula (inputs from the catalog; every step in Decimal, so sums never drift):

    gpu_units(m)  = R * (T_m / T_ref) ** w * (B_m / B_ref) ** (1 - w)
    mig_units(p)  = gpu_units_exact(m) * (c_p / 7) ** w * (s_p / 8) ** (1 - w)
    share_units   = gpu_units(m) / ratio                        (time-sliced share)

T is dense 16-bit tensor TFLOPS (BF16, or FP16 where the chip has no BF16), B is memory
bandwidth in GB/s, R is units per reference GPU (8: one unit is 1/8 of an A100-80GB), w is the
compute weight (0.5: a geometric mean, because training is bound by tensor math and inference
by memory bandwidth about equally often). A MIG instance gets its share of compute slices (c of
7) and of memory slices (s of 8, which also carry its share of bandwidth) under the same weights.

Every published value is rounded DOWN to 0.01 units: the pool never advertises more than the
hardware gives, and the shares of one time-sliced GPU never add up to more than the GPU.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal

from pydantic import BaseModel, ConfigDict, Field

from services.inventory.domain.catalog import COMPUTE_SLICES, MEMORY_SLICES, Catalog, GpuModel

__all__ = [
    "DEFAULT_BASIS",
    "UNIT_PRECISION",
    "UnitBasis",
    "UnitValue",
    "gpu_units",
    "mig_profile_units",
    "quantize_units",
    "time_slice_share_units",
    "unit_table",
]

UNIT_PRECISION = Decimal("0.01")


class UnitBasis(BaseModel):
    """What one compute unit means: a fraction of a reference model, and how compute and memory weigh."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reference_model: str = "A100-80GB"
    units_per_reference: int = Field(default=8, gt=0)
    compute_weight: Decimal = Field(default=Decimal("0.5"), ge=0, le=1)


DEFAULT_BASIS = UnitBasis()


class UnitValue(BaseModel):
    """The unit value of one model, or of one MIG profile of it (profile set)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    profile: str | None = None
    units: Decimal


def quantize_units(value: Decimal) -> Decimal:
    """Round down to the published precision (0.01 units)."""
    return value.quantize(UNIT_PRECISION, rounding=ROUND_DOWN)


def _weighted(compute_ratio: Decimal, memory_ratio: Decimal, weight: Decimal) -> Decimal:
    return compute_ratio**weight * memory_ratio ** (1 - weight)


def _exact_gpu_units(model: GpuModel, catalog: Catalog, basis: UnitBasis) -> Decimal:
    reference = catalog.get(basis.reference_model)
    compute = model.dense_16bit_tflops / reference.dense_16bit_tflops
    memory = model.memory_bandwidth_gbps / reference.memory_bandwidth_gbps
    return basis.units_per_reference * _weighted(compute, memory, basis.compute_weight)


def gpu_units(*, model: str, catalog: Catalog, basis: UnitBasis = DEFAULT_BASIS) -> Decimal:
    """Units of one whole GPU of `model` relative to the basis' reference model (memoised per catalog)."""
    spec = catalog.get(model)
    value: Decimal = catalog.memo(
        ("gpu_units", spec.name, basis), lambda: quantize_units(_exact_gpu_units(spec, catalog, basis))
    )
    return value


def mig_profile_units(
    *, model: str, profile: str, catalog: Catalog, basis: UnitBasis = DEFAULT_BASIS
) -> Decimal:
    """Units of one MIG instance, in proportion to its compute and memory slices."""
    gpu = catalog.get(model)
    spec = gpu.mig_profile(profile)

    def compute() -> Decimal:
        share = _weighted(
            Decimal(spec.compute_slices) / COMPUTE_SLICES,
            Decimal(spec.memory_slices) / MEMORY_SLICES,
            basis.compute_weight,
        )
        return quantize_units(_exact_gpu_units(gpu, catalog, basis) * share)

    value: Decimal = catalog.memo(("mig_units", gpu.name, spec.name, basis), compute)
    return value


def time_slice_share_units(*, gpu_units: Decimal, ratio: int) -> Decimal:
    """Units of one of `ratio` time-sliced shares of a GPU worth `gpu_units`."""
    if ratio < 1:
        raise ValueError(f"ratio must be at least 1, got {ratio}")
    return quantize_units(gpu_units / ratio)


def unit_table(*, catalog: Catalog, basis: UnitBasis = DEFAULT_BASIS) -> tuple[UnitValue, ...]:
    """Unit values of every model and every MIG profile in the catalog (what the catalog API shows)."""
    values: list[UnitValue] = []
    for model in catalog.models:
        values.append(
            UnitValue(model=model.name, units=gpu_units(model=model.name, catalog=catalog, basis=basis))
        )
        values.extend(
            UnitValue(
                model=model.name,
                profile=p.name,
                units=mig_profile_units(model=model.name, profile=p.name, catalog=catalog, basis=basis),
            )
            for p in model.mig_profiles
        )
    return tuple(values)
