"""From a placement's held devices to priced allocations: one allocation per (placement, priced resource).

A device is priced at the most specific resource with a price in force: its MIG profile, else its
GPU model, else the `default` resource, so an unknown model is never silently free. The default
prices are per compute-unit-hour, so MIG instances and time-sliced shares pay for the units they
hold; a GPU-hour price applies per device held (whole GPU, MIG instance or share).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from services.billing.domain.prices import PriceList, PriceNotFoundError, PricingClass, ResourceKey
from services.billing.domain.rating import Allocation
from services.billing.domain.tags import PROJECT, UNTAGGED

__all__ = ["DEFAULT_RESOURCE", "HeldDevice", "Placement", "allocations_for", "resolve_resource"]

DEFAULT_RESOURCE = ResourceKey(gpu_model="default")


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldDevice:
    """One GPU, MIG instance or time-sliced share a placement holds."""

    model: str
    units: Decimal
    profile: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """What billing needs of a placement to charge it."""

    placement_id: str
    workload_id: str
    tenant_id: str
    pricing_class: PricingClass
    tags: Mapping[str, str]
    devices: tuple[HeldDevice, ...]


def resolve_resource(
    *, device: HeldDevice, prices: PriceList, pricing_class: PricingClass, at: datetime
) -> ResourceKey:
    """The most specific resource priced at `at`: MIG profile, then model, then `default`."""
    candidates = [ResourceKey(gpu_model=device.model), DEFAULT_RESOURCE]
    if device.profile:
        candidates.insert(0, ResourceKey(gpu_model=device.model, mig_profile=device.profile))
    for key in candidates:
        try:
            prices.price_at(resource=key, pricing_class=pricing_class, at=at)
        except PriceNotFoundError:
            continue
        return key
    raise PriceNotFoundError(f"no {pricing_class} price for {device.model} nor a default at {at.isoformat()}")


def allocations_for(*, placement: Placement, prices: PriceList, at: datetime) -> list[Allocation]:
    """Open allocations for a placement starting at `at`, grouping devices priced the same way."""
    groups: dict[ResourceKey, list[HeldDevice]] = {}
    for device in placement.devices:
        key = resolve_resource(device=device, prices=prices, pricing_class=placement.pricing_class, at=at)
        groups.setdefault(key, []).append(device)
    return [_allocation(placement, key, devices, at) for key, devices in groups.items()]


def _allocation(
    placement: Placement, key: ResourceKey, devices: Iterable[HeldDevice], at: datetime
) -> Allocation:
    held = list(devices)
    return Allocation(
        allocation_id=f"{placement.placement_id}/{key.label()}",
        workload_id=placement.workload_id,
        tenant_id=placement.tenant_id,
        project=placement.tags.get(PROJECT) or UNTAGGED,
        resource=key,
        pricing_class=placement.pricing_class,
        compute_units=sum((d.units for d in held), Decimal(0)),
        gpus=Decimal(len(held)),
        started_at=at,
        tags=dict(placement.tags),
    )
