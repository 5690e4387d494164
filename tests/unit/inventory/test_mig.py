from __future__ import annotations

from collections import Counter
from itertools import combinations_with_replacement

import pytest

from services.inventory.domain.catalog import Catalog, GpuModel
from services.inventory.domain.errors import InvalidMigLayoutError, MigNotSupportedError
from services.inventory.domain.mig import (
    MigPlacement,
    MigRequest,
    check_layout,
    enumerate_layouts,
    place_layout,
    profile_combinations,
)

MODELS = ["A100-40GB", "H100-80GB-SXM"]


def requests(*profiles: str) -> list[MigRequest]:
    return [MigRequest(profile=p) for p in profiles]


def obeys_rules(model: GpuModel, layout: tuple[MigPlacement, ...]) -> bool:
    """The MIG guide's rules, restated independently of the code under test."""
    slots: list[int] = []
    for placed in layout:
        profile = model.mig_profile(placed.profile)
        if placed.start not in profile.placements:
            return False
        slots.extend(range(placed.start, placed.start + profile.memory_slices))
    compute = sum(model.mig_profile(p.profile).compute_slices for p in layout)
    return len(slots) == len(set(slots)) and max(slots) < 8 and compute <= 7


@pytest.mark.parametrize("name", MODELS)
def test_every_enumerated_layout_obeys_the_placement_rules(catalog: Catalog, name: str) -> None:
    model = catalog.get(name)
    layouts = enumerate_layouts(model=model)
    assert layouts
    assert all(obeys_rules(model, layout) for layout in layouts)
    assert len(set(layouts)) == len(layouts)


@pytest.mark.parametrize("name", MODELS)
def test_every_valid_layout_is_enumerated(catalog: Catalog, name: str) -> None:
    # Any subset of a valid layout is valid, so closure under adding one valid placement, starting
    # from every single placement, proves the enumeration misses nothing.
    model = catalog.get(name)
    layouts = set(enumerate_layouts(model=model))
    singles = [
        MigPlacement(profile=p.name, start=s, memory_slices=p.memory_slices, compute_slices=p.compute_slices)
        for p in model.mig_profiles
        for s in p.placements
    ]
    assert {(single,) for single in singles} <= layouts
    for layout in layouts:
        for extra in singles:
            grown = tuple(sorted((*layout, extra), key=lambda p: p.start))
            if extra not in layout and obeys_rules(model, grown):
                assert grown in layouts


@pytest.mark.parametrize("name", MODELS)
def test_every_enumerated_layout_is_accepted_with_its_slots_and_without(catalog: Catalog, name: str) -> None:
    model = catalog.get(name)
    for layout in enumerate_layouts(model=model):
        pinned = [MigRequest(profile=p.profile, start=p.start) for p in layout]
        assert place_layout(model=model, requests=pinned) == layout
        assert check_layout(model=model, requests=requests(*(p.profile for p in layout))).ok


@pytest.mark.parametrize("name", MODELS)
def test_a_profile_mix_is_accepted_exactly_when_some_valid_layout_holds_it(
    catalog: Catalog, name: str
) -> None:
    model = catalog.get(name)
    valid = profile_combinations(model=model)
    names = [p.name for p in model.mig_profiles]
    for size in range(1, 9):
        for mix in combinations_with_replacement(names, size):
            result = check_layout(model=model, requests=requests(*mix))
            assert result.ok == (tuple(sorted(mix)) in valid), mix
            assert result.ok or result.problems


@pytest.mark.parametrize("name", MODELS)
def test_instance_limits_in_the_catalog_match_the_geometry(catalog: Catalog, name: str) -> None:
    model = catalog.get(name)
    most: Counter[str] = Counter()
    for layout in enumerate_layouts(model=model):
        for profile, count in Counter(p.profile for p in layout).items():
            most[profile] = max(most[profile], count)
    assert most == {p.name: p.max_instances for p in model.mig_profiles}


@pytest.mark.parametrize(
    "mix",
    [
        ["7g.40gb"],
        ["4g.20gb", "3g.20gb"],
        ["3g.20gb", "3g.20gb"],
        ["4g.20gb", "2g.10gb", "1g.5gb"],
        ["3g.20gb", "2g.10gb", "2g.10gb"],
        ["2g.10gb", "2g.10gb", "2g.10gb", "1g.5gb"],
        ["1g.5gb"] * 7,
    ],
)
def test_documented_a100_combinations_are_accepted(catalog: Catalog, mix: list[str]) -> None:
    placed = place_layout(model=catalog.get("A100-40GB"), requests=requests(*mix))
    assert sorted(p.profile for p in placed) == sorted(mix)


@pytest.mark.parametrize(
    ("mix", "reason"),
    [
        (["3g.20gb"] * 3, "exceeds its limit"),
        (["7g.40gb", "1g.5gb"], "compute slices"),
        (["1g.5gb"] * 8, "exceeds its limit of 7"),
        (["4g.20gb", "4g.20gb"], "exceeds its limit of 1"),
        (["4g.20gb", "2g.10gb", "2g.10gb"], "needs 8 compute slices"),
        (["4g.20gb", "1g.10gb", "1g.10gb", "1g.10gb"], "needs 10 memory slices"),
    ],
)
def test_impossible_a100_combinations_are_refused_with_the_reason(
    catalog: Catalog, mix: list[str], reason: str
) -> None:
    with pytest.raises(InvalidMigLayoutError, match=reason) as caught:
        place_layout(model=catalog.get("A100-40GB"), requests=requests(*mix))
    assert caught.value.problems


def test_a_profile_of_another_model_is_named_as_undefined(catalog: Catalog) -> None:
    result = check_layout(model=catalog.get("A100-40GB"), requests=requests("3g.40gb"))
    assert not result.ok
    assert "profile 3g.40gb is not defined for A100-40GB" in result.problems[0]


def test_pinned_slots_report_disallowed_starts_and_overlaps(catalog: Catalog) -> None:
    pinned = [
        MigRequest(profile="2g.20gb", start=0),
        MigRequest(profile="1g.10gb", start=1),
        MigRequest(profile="3g.40gb", start=2),
    ]
    problems = check_layout(model=catalog.get("H100-80GB-SXM"), requests=pinned).problems
    assert any("overlaps 2g.20gb@0 on memory slices 1" in p for p in problems)
    assert any("3g.40gb cannot start at slot 2 (allowed: 0, 4)" in p for p in problems)


def test_a_pinned_instance_can_leave_no_allowed_slot_for_another(catalog: Catalog) -> None:
    layout = [MigRequest(profile="1g.5gb", start=4), *requests("2g.10gb", "4g.20gb")]
    result = check_layout(model=catalog.get("A100-40GB"), requests=layout)
    assert result.problems == ("2g.10gb does not fit on A100-40GB after placing 1g.5gb@4 and 4g.20gb",)


def test_unpinned_profiles_fill_around_pinned_ones(catalog: Catalog) -> None:
    layout = [MigRequest(profile="1g.10gb", start=0), MigRequest(profile="3g.40gb")]
    placed = place_layout(model=catalog.get("H100-80GB-SXM"), requests=layout)
    assert [p.label for p in placed] == ["1g.10gb@0", "3g.40gb@4"]


def test_slot_assignment_does_not_depend_on_request_order(catalog: Catalog) -> None:
    model = catalog.get("H100-80GB-SXM")
    mix = ["1g.20gb", "2g.20gb", "4g.40gb"]
    first = place_layout(model=model, requests=requests(*mix))
    assert place_layout(model=model, requests=requests(*reversed(mix))) == first
    assert obeys_rules(model, first)


def test_a_model_without_mig_has_no_layouts(catalog: Catalog) -> None:
    with pytest.raises(MigNotSupportedError):
        enumerate_layouts(model=catalog.get("L4"))
    with pytest.raises(MigNotSupportedError):
        check_layout(model=catalog.get("T4"), requests=requests("1g.5gb"))
