from datetime import timedelta
from decimal import Decimal

from services.billing.domain.prices import PriceList, PricingClass
from services.billing.domain.spot import WorkloadUsage, advise_spot, spot_report
from tests.unit.billing.factories import T0, entry

PRICES = PriceList.of(
    [
        entry("od", 4_000_000, start=T0 - timedelta(days=60)),
        entry("spot", 1_600_000, start=T0 - timedelta(days=60), pricing_class=PricingClass.SPOT),
    ]
)


def _usage(workload_id: str, *, hours: str = "100", non_critical: bool = True, **kw: bool) -> WorkloadUsage:
    return WorkloadUsage(
        workload_id=workload_id,
        tenant_id="acme",
        resource=entry("x", 0, start=T0).resource,
        pricing_class=PricingClass.ON_DEMAND,
        gpu_hours=Decimal(hours),
        compute_unit_hours=Decimal(hours) * 8,
        window=timedelta(days=30),
        non_critical=non_critical,
        **kw,
    )


def test_non_critical_on_demand_work_gets_spot_advice_with_its_saving() -> None:
    advice = advise_spot(usage=_usage("wl-1"), prices=PRICES, at=T0)

    assert advice is not None
    assert (advice.on_demand_micro, advice.spot_micro, advice.saving_micro) == (
        400_000_000,
        160_000_000,
        240_000_000,
    )
    assert advice.saving_pct == Decimal("60.00")


def test_checkpointable_work_qualifies_even_when_critical() -> None:
    assert advise_spot(usage=_usage("wl-1", non_critical=False, checkpointable=True), prices=PRICES, at=T0)


def test_critical_work_that_cannot_checkpoint_gets_no_advice() -> None:
    assert advise_spot(usage=_usage("wl-1", non_critical=False), prices=PRICES, at=T0) is None


def test_no_advice_without_a_spot_price() -> None:
    od_only = PriceList.of([entry("od", 4_000_000, start=T0 - timedelta(days=1))])

    assert advise_spot(usage=_usage("wl-1"), prices=od_only, at=T0) is None


def test_tenant_report_states_saving_as_amount_and_share_of_current_cost() -> None:
    usages = [_usage("wl-1"), _usage("wl-2", hours="100", non_critical=False)]

    report = spot_report(tenant_id="acme", usages=usages, prices=PRICES, at=T0)

    assert [a.workload_id for a in report.advices] == ["wl-1"]
    assert report.current_cost_micro == 800_000_000
    assert report.saving_micro == 240_000_000
    assert report.saving_pct == Decimal("30.00")
