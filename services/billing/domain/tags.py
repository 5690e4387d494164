"""Tags for cost allocation: effective tags, required-tag policies, and grouping charges by tag."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

__all__ = [
    "COST_CENTER",
    "PROJECT",
    "TEAM",
    "UNTAGGED",
    "FlaggedWorkload",
    "RequiredTagPolicy",
    "TagViolation",
    "Tagged",
    "allocate_costs",
    "check_required",
    "effective_tags",
]

PROJECT = "project"
TEAM = "team"
COST_CENTER = "cost-center"
UNTAGGED = "(untagged)"  # the bucket for charges that lack the grouping tag, so totals still add up


class Tagged(Protocol):
    """Anything carrying tags and an amount, such as a ChargeLine."""

    @property
    def tags(self) -> Mapping[str, str]: ...

    @property
    def amount_micro(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RequiredTagPolicy:
    """The tag keys every workload of a tenant must carry."""

    tenant_id: str
    required: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class TagViolation:
    """A workload missing required tags."""

    tenant_id: str
    workload_id: str
    missing: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FlaggedWorkload:
    """A placement flagged for missing required tags, as kept for the tenant to see."""

    workload_id: str
    placement_id: str
    tenant_id: str
    missing: tuple[str, ...]
    flagged_at: datetime


def effective_tags(*, tenant_defaults: Mapping[str, str], workload_tags: Mapping[str, str]) -> dict[str, str]:
    """Tenant defaults overlaid by the workload's own tags (workload wins); blank values are unset."""
    merged = {**tenant_defaults, **workload_tags}
    return {key: value for key, value in merged.items() if value.strip()}


def check_required(
    *, policy: RequiredTagPolicy, workload_id: str, tags: Mapping[str, str]
) -> TagViolation | None:
    """A violation naming the missing keys, or None when the workload satisfies the policy."""
    missing = tuple(sorted(key for key in policy.required if not tags.get(key, "").strip()))
    if not missing:
        return None
    return TagViolation(tenant_id=policy.tenant_id, workload_id=workload_id, missing=missing)


def allocate_costs(items: Iterable[Tagged], *, key: str) -> dict[str, int]:
    """Total amount per value of tag `key`; items without it go to UNTAGGED, so the sum is preserved."""
    totals: defaultdict[str, int] = defaultdict(int)
    for item in items:
        totals[item.tags.get(key) or UNTAGGED] += item.amount_micro
    return dict(totals)
