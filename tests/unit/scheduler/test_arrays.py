"""Job arrays' pure parts: every bad item named, the whole demand, rows written as the models write them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from libs.common.db.uow import outbox_row
from libs.common.events import EVENT_TYPES, decode
from libs.common.events.scheduler import WorkloadQueuedV1, WorkloadSubmittedV1
from services.scheduler.adapters.catalog_loader import load_catalog, load_gpu_models
from services.scheduler.domain.arrays import (
    MAX_ARRAY_ITEMS,
    check_size,
    item_demands,
    needs_fleet,
    parse_items,
    resolve_items,
)
from services.scheduler.domain.creation import parse_spec, run_json_of, run_of
from services.scheduler.domain.errors import ItemProblem, ItemsInvalid, ValidationError
from services.scheduler.domain.quota import QuotaUsage, spec_demand
from services.scheduler.domain.stored import StoredArray
from services.scheduler.service.array_events import array_outbox, to_json
from services.scheduler.service.submission import event_resources, resources_of

CATALOG = load_catalog(file=None, references={})
MODELS = load_gpu_models()


def _spec(**extra: Any) -> dict[str, Any]:
    return {
        "kind": "job",
        "image": {"name": "pytorch", "version": "2.3"},
        "resources": {"kind": "gpu", "model": "a100-80gb", "count": 2},
        "network": {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"},
        **extra,
    }


def test_an_array_holds_one_to_ten_thousand_items() -> None:
    check_size(1)
    check_size(MAX_ARRAY_ITEMS)
    for count in (0, MAX_ARRAY_ITEMS + 1):
        with pytest.raises(ValidationError, match=f"1 to {MAX_ARRAY_ITEMS} items, this one {count}"):
            check_size(count)


def test_every_bad_item_is_named_with_the_field_and_message_a_single_request_gets() -> None:
    items: list[Any] = [
        _spec(),
        _spec(urgency=2),
        7,
        _spec(resources={"kind": "gpu", "model": "Z9", "count": 1}),
    ]
    parsed = parse_items(items, catalog=CATALOG)
    with pytest.raises(ItemsInvalid) as caught:
        resolve_items(parsed, models=MODELS)
    problems = caught.value.problems
    assert [(p.index, p.path) for p in problems] == [
        (1, "items.1.urgency"),
        (2, "items.2"),
        (3, "items.3.resources.model"),
    ]
    with pytest.raises(ValidationError) as single:
        parse_spec(items[1], catalog=CATALOG)
    assert (problems[0].field, problems[0].message) == (single.value.field, single.value.message)
    assert str(caught.value).startswith("items.1.urgency: ")
    assert "(and 2 more items)" in str(caught.value)


def test_a_model_only_the_fleet_has_is_read_from_the_fleet_once() -> None:
    parsed = parse_items(
        [_spec(resources={"kind": "gpu", "model": "X1-custom", "count": 1})], catalog=CATALOG
    )
    assert needs_fleet(parsed, models=MODELS)
    assert not needs_fleet(parse_items([_spec()], catalog=CATALOG), models=MODELS)
    (spec,) = resolve_items(parsed, models=MODELS, in_fleet={"X1-custom"})
    assert spec.resources.model_dump()["model"] == "X1-custom"


def test_items_ask_for_the_catalog_name_of_their_model() -> None:
    (spec,) = resolve_items(parse_items([_spec()], catalog=CATALOG), models=MODELS)
    assert spec.resources.model_dump()["model"] == "A100-80GB"


def test_each_distinct_item_demand_is_checked_once_naming_its_first_item() -> None:
    items = [_spec(), _spec(resources={"kind": "units", "units": 2.5}), _spec()]
    specs = resolve_items(parse_items(items, catalog=CATALOG), models=MODELS)
    assert spec_demand(specs[0]) == QuotaUsage(gpus=2, workloads=1)
    assert item_demands(specs) == [
        (0, QuotaUsage(gpus=2, workloads=1)),
        (1, QuotaUsage(units_milli=2500, workloads=1)),
    ]


def test_an_item_problem_of_a_non_object_names_the_item() -> None:
    assert ItemProblem(index=4, field="body", message="m").path == "items.4"
    assert ItemProblem(index=4, field="env.A", message="m").path == "items.4.env.A"


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"time_limit_s": 600, "command": ["python"], "args": ["-c", "print(1)"], "env": {"A": "é"}},
        {"working_dir": "/w", "cpu_millis": 500, "memory_bytes": 2**30, "grace_s": 5},
        {"checkpoint": {"signal": "SIGUSR1"}},
    ],
)
def test_the_run_spec_written_from_the_spec_dump_is_the_one_run_of_gives(extra: dict[str, Any]) -> None:
    spec = parse_spec(_spec(**extra), catalog=CATALOG)
    assert run_json_of(spec.model_dump(mode="json"), catalog=CATALOG) == run_of(
        spec, catalog=CATALOG
    ).model_dump(mode="json")


@pytest.mark.parametrize("tenant", ["acme", "50%s-of-%d"])  # a % in the tenant is no placeholder
def test_array_events_decode_as_the_models_written_one_by_one_do(tenant: str) -> None:
    items = [_spec(tags={"project": "vision", "note": 'quote " é'}), _spec(preemptible=True, urgency=0.25)]
    specs = resolve_items(parse_items(items, catalog=CATALOG), models=MODELS)
    now = datetime(2026, 12, 3, 11, 0, 0, 123456, tzinfo=UTC)
    array = StoredArray("arr-1", tenant, None, "x", ["wl-a", "wl-b"], [0.5, 0.312], 7, now)
    resources = [event_resources(s.model_dump(mode="json")["resources"]) for s in specs]
    rows = array_outbox(
        array,
        specs=specs,
        tags=[to_json(s.tags) for s in specs],
        resources=resources,
        source="scheduler",
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        time=now,
    )
    expected = []
    for i, (wid, spec) in enumerate(zip(array.workload_ids, specs, strict=True)):
        submitted = WorkloadSubmittedV1(
            workload_id=wid,
            tenant_id=tenant,
            kind=spec.kind.value,
            urgency=spec.urgency,
            preemptible=spec.preemptible,
            pricing_class="spot" if spec.preemptible else "on_demand",
            tags=spec.tags,
            resources=resources_of(spec),
        )
        queued = WorkloadQueuedV1(
            workload_id=wid, tenant_id=tenant, position=7 + i, priority=array.priorities[i]
        )
        expected += [outbox_row(e, source="scheduler", tenant=tenant, time=now) for e in (submitted, queued)]
    assert len(rows) == len(expected) == 4
    assert len({r[0] for r in rows}) == 4
    for row, want in zip(rows, expected, strict=True):
        got_env, got = decode(row[3], EVENT_TYPES)
        want_env, wanted = decode(want[3], EVENT_TYPES)
        assert got == wanted
        assert got_env.model_dump(exclude={"id", "traceparent"}) == want_env.model_dump(
            exclude={"id", "traceparent"}
        )
        assert (got_env.id, got_env.traceparent) == (row[0], row[4])
        assert row[1:3] == want[1:3]
