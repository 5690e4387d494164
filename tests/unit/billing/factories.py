"""Small builders shared by the billing unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from services.billing.domain.prices import PriceBasis, PriceEntry, PriceList, PricingClass, ResourceKey
from services.billing.domain.rating import Allocation

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
A100 = ResourceKey(gpu_model="A100-80GB")
MIG_1G = ResourceKey(gpu_model="A100-80GB", mig_profile="1g.10gb")


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def entry(
    price_id: str,
    micro_per_hour: int,
    *,
    start: datetime,
    end: datetime | None = None,
    resource: ResourceKey = A100,
    pricing_class: PricingClass = PricingClass.ON_DEMAND,
    basis: PriceBasis = PriceBasis.GPU_HOUR,
) -> PriceEntry:
    return PriceEntry(
        price_id=price_id,
        resource=resource,
        pricing_class=pricing_class,
        basis=basis,
        micro_per_hour=micro_per_hour,
        effective_from=start,
        effective_to=end,
    )


def flat_prices(micro_per_hour: int = 3_600_000) -> PriceList:
    """1 GPU-hour on-demand at $3.60, i.e. 60_000 micro a minute, so expected amounts are easy."""
    return PriceList.of([entry("od-v1", micro_per_hour, start=T0 - timedelta(days=30))])


def allocation(
    allocation_id: str = "alloc-1",
    *,
    started_at: datetime = T0,
    tenant_id: str = "acme",
    project: str = "vision",
    gpus: str = "1",
    compute_units: str = "8",
    pricing_class: PricingClass = PricingClass.ON_DEMAND,
    resource: ResourceKey = A100,
    tags: dict[str, str] | None = None,
) -> Allocation:
    return Allocation(
        allocation_id=allocation_id,
        workload_id=f"wl-{allocation_id}",
        tenant_id=tenant_id,
        project=project,
        resource=resource,
        pricing_class=pricing_class,
        compute_units=Decimal(compute_units),
        gpus=Decimal(gpus),
        started_at=started_at,
        tags=tags or {},
    )
