"""MIG geometry: which GPU-instance profiles fit together on one GPU, and at which slots.

Rules (NVIDIA MIG User Guide, "Supported MIG Profiles"; NVML GpuInstancePlacement): a GPU has
8 memory slices and 7 compute slices. An instance of a profile occupies `memory_slices`
consecutive memory slices beginning at one of the profile's allowed start slots; no two
instances may share a memory slice, and the compute slices of all instances may not exceed 7.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field

from services.inventory.domain.catalog import COMPUTE_SLICES, MEMORY_SLICES, GpuModel, MigProfile
from services.inventory.domain.errors import InvalidMigLayoutError, MigNotSupportedError

__all__ = [
    "LayoutCheck",
    "MigPlacement",
    "MigRequest",
    "check_layout",
    "enumerate_layouts",
    "place_layout",
    "profile_combinations",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class MigRequest(BaseModel):
    """One requested instance: a profile and, optionally, the start slot the caller insists on."""

    model_config = _FROZEN

    profile: str
    start: int | None = Field(default=None, ge=0, lt=MEMORY_SLICES)


class MigPlacement(BaseModel):
    """One placed instance: profile, start memory slice and the slices it occupies."""

    model_config = _FROZEN

    profile: str
    start: int = Field(ge=0, lt=MEMORY_SLICES)
    memory_slices: int
    compute_slices: int

    @property
    def slots(self) -> frozenset[int]:
        return frozenset(range(self.start, self.start + self.memory_slices))

    @property
    def label(self) -> str:
        return f"{self.profile}@{self.start}"


class LayoutCheck(BaseModel):
    """Outcome of checking a layout: placements when valid, otherwise every problem found."""

    model_config = _FROZEN

    model: str
    placements: tuple[MigPlacement, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def _placed(profile: MigProfile, start: int) -> MigPlacement:
    return MigPlacement(
        profile=profile.name,
        start=start,
        memory_slices=profile.memory_slices,
        compute_slices=profile.compute_slices,
    )


def _profiles_of(model: GpuModel) -> dict[str, MigProfile]:
    if not model.mig_supported:
        raise MigNotSupportedError(f"{model.name} does not support MIG")
    return {profile.name: profile for profile in model.mig_profiles}


def _static_problems(model: GpuModel, requests: Sequence[MigRequest]) -> list[str]:
    """Problems visible without searching: unknown profiles, limits, totals, bad or clashing fixed slots."""
    profiles = _profiles_of(model)
    problems = [
        f"profile {r.profile} is not defined for {model.name} (profiles: {', '.join(profiles)})"
        for r in requests
        if r.profile not in profiles
    ]
    known = [r for r in requests if r.profile in profiles]
    for name, count in sorted(Counter(r.profile for r in known).items()):
        if count > profiles[name].max_instances:
            problems.append(f"{name} x{count} exceeds its limit of {profiles[name].max_instances} per GPU")
    compute = sum(profiles[r.profile].compute_slices for r in known)
    memory = sum(profiles[r.profile].memory_slices for r in known)
    if compute > COMPUTE_SLICES:
        problems.append(f"layout needs {compute} compute slices, the GPU has {COMPUTE_SLICES}")
    if memory > MEMORY_SLICES:
        problems.append(f"layout needs {memory} memory slices, the GPU has {MEMORY_SLICES}")
    return problems + _fixed_slot_problems(profiles, [r for r in known if r.start is not None])


def _fixed_slot_problems(profiles: dict[str, MigProfile], fixed: Sequence[MigRequest]) -> list[str]:
    problems: list[str] = []
    placed: list[MigPlacement] = []
    for request in fixed:
        assert request.start is not None
        profile = profiles[request.profile]
        if request.start not in profile.placements:
            allowed = ", ".join(map(str, profile.placements))
            problems.append(f"{profile.name} cannot start at slot {request.start} (allowed: {allowed})")
            continue
        new = _placed(profile, request.start)
        for other in placed:
            if shared := sorted(new.slots & other.slots):
                problems.append(
                    f"{new.label} overlaps {other.label} on memory slices {', '.join(map(str, shared))}"
                )
        placed.append(new)
    return problems


def _search(profiles: Sequence[MigProfile], taken: frozenset[int]) -> tuple[MigPlacement, ...] | None:
    """Place `profiles` in order at their lowest free allowed starts, backtracking when stuck."""
    if not profiles:
        return ()
    head, rest = profiles[0], profiles[1:]
    for start in head.placements:
        placement = _placed(head, start)
        if placement.slots & taken:
            continue
        tail = _search(rest, taken | placement.slots)
        if tail is not None:
            return (placement, *tail)
    return None


def _assign_free(
    model: GpuModel, fixed: tuple[MigPlacement, ...], free: Sequence[MigProfile]
) -> tuple[tuple[MigPlacement, ...], str | None]:
    """Assign slots to the free requests; on failure name the first one that cannot fit."""
    taken = frozenset().union(*(p.slots for p in fixed))
    found = _search(free, taken)
    if found is not None:
        return fixed + found, None
    for count in range(1, len(free) + 1):
        if _search(free[:count], taken) is None:
            before = ", ".join(p.label for p in fixed) or "nothing"
            fitted = ", ".join(p.name for p in free[: count - 1])
            context = f"{before}" + (f" and {fitted}" if fitted else "")
            return (), f"{free[count - 1].name} does not fit on {model.name} after placing {context}"
    raise AssertionError("an unplaceable layout has an unplaceable prefix")


def _ordered(profiles: Sequence[MigProfile]) -> list[MigProfile]:
    # Biggest first, so the deterministic assignment is also the one least likely to strand slots.
    return sorted(profiles, key=lambda p: (-p.memory_slices, -p.compute_slices, p.name))


def check_layout(*, model: GpuModel, requests: Sequence[MigRequest]) -> LayoutCheck:
    """Check a requested layout against the model's geometry and assign every start slot deterministically."""
    problems = _static_problems(model, requests)
    if problems:
        return LayoutCheck(model=model.name, problems=tuple(problems))
    profiles = _profiles_of(model)
    fixed = tuple(_placed(profiles[r.profile], r.start) for r in requests if r.start is not None)
    free = _ordered([profiles[r.profile] for r in requests if r.start is None])
    placements, failure = _assign_free(model, fixed, free)
    if failure is not None:
        return LayoutCheck(model=model.name, problems=(failure,))
    return LayoutCheck(model=model.name, placements=tuple(sorted(placements, key=lambda p: p.start)))


def place_layout(*, model: GpuModel, requests: Sequence[MigRequest]) -> tuple[MigPlacement, ...]:
    """Return the placed layout, or raise InvalidMigLayoutError naming every problem."""
    result = check_layout(model=model, requests=requests)
    if not result.ok:
        raise InvalidMigLayoutError(model=model.name, problems=result.problems)
    return result.placements


def _layouts_from(profiles: Sequence[MigProfile], slot: int) -> Iterator[tuple[MigPlacement, ...]]:
    """Every non-overlapping arrangement of instances in memory slices slot..7, in slot order."""
    if slot >= MEMORY_SLICES:
        yield ()
        return
    yield from _layouts_from(profiles, slot + 1)
    for profile in profiles:
        if slot in profile.placements:
            head = _placed(profile, slot)
            for tail in _layouts_from(profiles, slot + profile.memory_slices):
                yield (head, *tail)


def enumerate_layouts(*, model: GpuModel) -> tuple[tuple[MigPlacement, ...], ...]:
    """Every valid non-empty placed layout of the model (distinct sets of instances at their slots)."""
    profiles = list(_profiles_of(model).values())
    return tuple(
        layout
        for layout in _layouts_from(profiles, 0)
        if layout and sum(p.compute_slices for p in layout) <= COMPUTE_SLICES
    )


def profile_combinations(*, model: GpuModel) -> frozenset[tuple[str, ...]]:
    """Every distinct multiset of profiles (sorted names) that fits on one GPU of the model."""
    return frozenset(tuple(sorted(p.profile for p in layout)) for layout in enumerate_layouts(model=model))
