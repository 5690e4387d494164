from services.billing.domain.rating import rate
from services.billing.domain.tags import (
    COST_CENTER,
    TEAM,
    UNTAGGED,
    RequiredTagPolicy,
    allocate_costs,
    check_required,
    effective_tags,
)
from tests.unit.billing.factories import T0, allocation, flat_prices, minutes


def test_workload_tags_override_tenant_defaults() -> None:
    tags = effective_tags(
        tenant_defaults={TEAM: "platform", COST_CENTER: "cc-1"}, workload_tags={TEAM: "research", "exp": "42"}
    )

    assert tags == {TEAM: "research", COST_CENTER: "cc-1", "exp": "42"}


def test_blank_workload_tag_does_not_count_as_set() -> None:
    assert effective_tags(tenant_defaults={}, workload_tags={TEAM: "  "}) == {}


def test_missing_required_tags_are_flagged_with_the_missing_keys() -> None:
    policy = RequiredTagPolicy(tenant_id="acme", required=frozenset({TEAM, COST_CENTER, "owner"}))

    violation = check_required(policy=policy, workload_id="wl-1", tags={TEAM: "research", "owner": ""})

    assert violation is not None
    assert violation.missing == (COST_CENTER, "owner")
    assert (
        check_required(policy=policy, workload_id="wl-1", tags={TEAM: "a", COST_CENTER: "b", "owner": "c"})
        is None
    )


def test_costs_group_by_tag_value_with_untagged_bucket_keeping_the_total() -> None:
    prices, now = flat_prices(), T0 + minutes(2)
    lines = [
        *rate(
            allocation=allocation("a", tags={TEAM: "research"}), rated_until=None, now=now, prices=prices
        ).lines,
        *rate(
            allocation=allocation("b", tags={TEAM: "infra"}), rated_until=None, now=now, prices=prices
        ).lines,
        *rate(allocation=allocation("c"), rated_until=None, now=now, prices=prices).lines,
    ]

    by_team = allocate_costs(lines, key=TEAM)

    assert by_team == {"research": 120_000, "infra": 120_000, UNTAGGED: 120_000}
    assert sum(by_team.values()) == sum(line.amount_micro for line in lines)
