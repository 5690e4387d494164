"""Job arrays: many creation requests in one, each validated as a single request is, admitted as one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from services.scheduler.domain.catalog import ImageCatalog
from services.scheduler.domain.creation import CreationSpec, parse_spec
from services.scheduler.domain.errors import ItemProblem, ItemsInvalid, ValidationError
from services.scheduler.domain.gpu_models import GpuModels, requested_model
from services.scheduler.domain.quota import QuotaUsage, spec_demand

__all__ = [
    "MAX_ARRAY_ITEMS",
    "check_size",
    "item_demands",
    "needs_fleet",
    "parse_items",
    "resolve_items",
]

#: The most items one array may hold (Slurm's MaxArraySize defaults to 1001; the issue asks 10,000).
MAX_ARRAY_ITEMS = 10_000
_NOT_AN_OBJECT = "an item is a JSON object, the body POST /v1/workloads takes"


def check_size(count: int) -> None:
    """Refuse an empty array, or one of more than MAX_ARRAY_ITEMS items, before any item is read."""
    if not 1 <= count <= MAX_ARRAY_ITEMS:
        raise ValidationError(
            field="items", message=f"an array holds 1 to {MAX_ARRAY_ITEMS} items, this one {count}"
        )


def parse_items(items: Sequence[Any], *, catalog: ImageCatalog) -> list[CreationSpec | ItemProblem]:
    """Each item validated as POST /v1/workloads validates its body: its spec, or its problem."""
    parsed: list[CreationSpec | ItemProblem] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            parsed.append(ItemProblem(index=index, field="body", message=_NOT_AN_OBJECT))
            continue
        try:
            parsed.append(parse_spec(item, catalog=catalog))
        except ValidationError as exc:
            parsed.append(ItemProblem(index=index, field=exc.field, message=exc.message))
    return parsed


def needs_fleet(parsed: Iterable[CreationSpec | ItemProblem], *, models: GpuModels) -> bool:
    """Whether an item asks for a model the catalog lacks, so the fleet's models must be read."""
    for spec in parsed:
        asked = requested_model(spec) if isinstance(spec, CreationSpec) else None
        if asked is not None and models.canonical(asked) is None:
            return True
    return False


def resolve_items(
    parsed: Sequence[CreationSpec | ItemProblem], *, models: GpuModels, in_fleet: Iterable[str] = ()
) -> list[CreationSpec]:
    """Every spec asking for the catalog's name of its model, as a single request's is; ItemsInvalid lists
    each bad item (invalid, or asking for a model nothing could ever place on) in index order."""
    fleet = frozenset(in_fleet)
    specs: list[CreationSpec] = []
    problems: list[ItemProblem] = []
    for index, spec in enumerate(parsed):
        if isinstance(spec, ItemProblem):
            problems.append(spec)
            continue
        try:
            specs.append(models.resolve(spec, in_fleet=fleet))
        except ValidationError as exc:
            problems.append(ItemProblem(index=index, field=exc.field, message=exc.message))
    if problems:
        raise ItemsInvalid(problems)
    return specs


def item_demands(specs: Iterable[CreationSpec]) -> list[tuple[int, QuotaUsage]]:
    """Each distinct demand of the array's items, with the index of the first item asking it. The quota
    is checked item by item, as the items sent one by one at this instant would be: an array of more
    work than the quota holds is queued, each item placed as the quota allows."""
    first: dict[QuotaUsage, int] = {}
    for i, spec in enumerate(specs):
        first.setdefault(spec_demand(spec), i)
    return [(i, demand) for demand, i in first.items()]
