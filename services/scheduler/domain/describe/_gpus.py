"""The GPU catalogue as the reader sees it: names people write, memory, MIG profiles, and the smallest
GPU or profile that holds a memory need."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from services.scheduler.domain.describe._families import bounded

__all__ = [
    "MAX_GPUS",
    "GpuFacts",
    "MigFacts",
    "Pick",
    "gpu_mentions",
    "pick_gpu",
    "pick_slice",
    "variants_of",
]

MAX_GPUS = 64  # GpuRequest.count's bound


@dataclass(frozen=True, slots=True)
class MigFacts:
    """One MIG profile of a GPU model."""

    name: str
    memory_gb: int
    compute_slices: int


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """One catalogue GPU model: canonical name, aliases, memory and MIG profiles."""

    name: str
    memory_gb: int
    aliases: tuple[str, ...] = ()
    mig: tuple[MigFacts, ...] = ()

    @property
    def family(self) -> str:
        """What people call it without memory or form factor: ``A100`` for ``A100-80GB``."""
        return self.name.split("-")[0]


@dataclass(frozen=True, slots=True)
class Pick:
    """A choice made: the model (or MIG profile) and count, and why, in words."""

    model: str | None
    count: int
    reason: str
    profile: str | None = None


def _loose(name: str) -> str:
    """A catalogue name as people write it: spaces and hyphens interchangeable or absent."""
    return r"[\s-]*".join(re.escape(p) for p in re.split(r"[\s-]+", name))


@cache
def gpu_mentions(gpus: tuple[GpuFacts, ...]) -> list[tuple[re.Pattern[str], str]]:
    """Patterns for every alias (longest first), then each family with an optional memory and form factor;
    each with what it names: a canonical model, or ``family:<name>``."""
    exact = sorted(((a, g.name) for g in gpus for a in (g.name, *g.aliases)), key=lambda p: -len(p[0]))
    found = [(re.compile(bounded(_loose(a) + "s?"), re.IGNORECASE), name) for a, name in exact]
    for family in sorted({g.family for g in gpus}, key=lambda f: -len(f)):
        body = rf"(?:nvidia[\s-]*)?(?:tesla[\s-]*)?{re.escape(family)}"
        body += r"(?:[\s-]*(?P<mem>\d+)\s*gb?)?(?:[\s-]*(?P<form>pcie|sxm\d?))?s?"
        found.append((re.compile(bounded(body), re.IGNORECASE), f"family:{family}"))
    return found


def variants_of(
    gpus: Sequence[GpuFacts], *, family: str, mem: str | None, form: str | None
) -> list[GpuFacts]:
    """Catalogue models of ``family`` with that memory (GB) and form factor, where said."""
    out = [g for g in gpus if g.family == family]
    if mem is not None:
        out = [g for g in out if g.memory_gb == int(mem)]
    if form is not None:
        out = [g for g in out if form.lower().rstrip("0123456789") in g.name.lower()] or out[:0]
    return out


def _choices(pool: Sequence[GpuFacts], in_fleet: frozenset[str]) -> list[tuple[list[GpuFacts], str]]:
    """Where to look, in order: the fleet's models of the pool (when it has any), then the whole pool."""
    inside = [g for g in pool if g.name in in_fleet]
    catalogue = (list(pool), "in the GPU catalogue")
    return [(inside, "of the fleet's GPU models"), catalogue] if inside else [catalogue]


def _fits(g: GpuFacts, need_gb: float) -> int:
    return max(1, math.ceil(need_gb / g.memory_gb))


def _with_count(pool: Sequence[GpuFacts], *, need_gb: float, count: int, in_fleet: frozenset[str]) -> Pick:
    for models, where in _choices(pool, in_fleet):
        holding = [g for g in models if g.memory_gb * count >= need_gb]
        if holding:
            best = min(holding, key=lambda g: (g.memory_gb, g.name))
            each = f"{count} x {best.name} ({best.memory_gb} GB each)"
            return Pick(best.name, count, f"{each}, the smallest {where} that hold it")
    top = max(pool, key=lambda g: (g.memory_gb, g.name))
    return Pick(top.name, count, f"{count} x {top.name} hold {count * top.memory_gb} GB, less than needed")


def pick_gpu(
    pool: Sequence[GpuFacts], *, need_gb: float | None, count: int | None, in_fleet: frozenset[str]
) -> Pick:
    """The smallest model (fewest GPUs first) that holds ``need_gb``, the fleet's models before others;
    ``count`` kept when said; model None when nothing within MAX_GPUS holds the need."""
    if need_gb is None:
        models, where = _choices(pool, in_fleet)[0]
        best = min(models, key=lambda g: (g.memory_gb, g.name))
        return Pick(best.name, count or 1, f"{best.name} ({best.memory_gb} GB), the smallest {where}")
    if count is not None:
        return _with_count(pool, need_gb=need_gb, count=count, in_fleet=in_fleet)
    for models, where in _choices(pool, in_fleet):
        best = min(models, key=lambda g: (_fits(g, need_gb), g.memory_gb, g.name))
        n = _fits(best, need_gb)
        if n <= MAX_GPUS:
            what = "the smallest GPU that fits" if n == 1 else "the fewest, then smallest, GPUs that fit"
            return Pick(best.name, n, f"{n} x {best.name} ({best.memory_gb} GB each), {what} {where}")
    return Pick(None, 0, f"no {MAX_GPUS} GPUs of any model hold {need_gb:.0f} GB")


def pick_slice(
    pool: Sequence[GpuFacts],
    *,
    need_gb: float | None,
    profile: str | None,
    small: bool,
    named: bool,
    in_fleet: frozenset[str],
) -> Pick:
    """A MIG profile: the one named, else the smallest that holds ``need_gb``, else (``small``) the smallest
    there is; on one model only when a GPU was ``named`` (the fleet's first); ``profile`` None (and the
    reason why) when none qualifies."""
    offered = [(m, g) for g in pool for m in g.mig]
    if profile is not None:
        offered = [(m, g) for m, g in offered if m.name == profile.lower()]
        if not offered:
            return Pick(None, 0, f"no GPU named offers MIG profile {profile}")
    elif need_gb is not None:
        offered = [(m, g) for m, g in offered if m.memory_gb >= need_gb]
        if not offered:
            return Pick(None, 0, f"no MIG profile holds {need_gb:.1f} GB")
    elif not small:
        return Pick(None, 0, "a slice of what size? name a model or a MIG profile such as 1g.10gb")
    mig, _ = min(offered, key=lambda mg: (mg[0].memory_gb, mg[0].compute_slices, mg[1].memory_gb, mg[1].name))
    owners = sorted({g.name for m, g in offered if m.name == mig.name}, key=lambda n: (n not in in_fleet, n))
    model = owners[0] if named else None
    reason = f"MIG profile {mig.name} ({mig.memory_gb} GB) on {', '.join(owners)}"
    if need_gb is not None and mig.memory_gb < need_gb:
        reason += f", less than the {need_gb:.1f} GB needed"
    return Pick(model, 1, reason, profile=mig.name)
