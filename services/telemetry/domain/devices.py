"""Device actions on a host (GPU reset, node reboot, MIG layouts): their results and the layout rule."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MEMORY_SLICES",
    "OUTPUT_LIMIT",
    "DeviceResult",
    "MigInstance",
    "MigListing",
    "MigProfile",
    "Outcome",
    "creation_order",
    "cut_output",
    "layout_problem",
    "memory_slices",
    "profile_slices",
]

Outcome = Literal["succeeded", "failed", "refused"]
OUTPUT_LIMIT = 4096  # bytes of command output an action reports
MEMORY_SLICES = 8  # every MIG-capable GPU so far (A100, H100, H200) has 8 memory slices and 7 compute
_SLICES = re.compile(r"^(\d+)g\.")


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """What one device action did: every command run (argv), the last exit status, and their output."""

    outcome: Outcome
    reason: str = ""
    commands: tuple[tuple[str, ...], ...] = ()
    exit_code: int | None = None
    output: str = ""

    @classmethod
    def refused(cls, reason: str) -> DeviceResult:
        """Nothing ran, for this reason."""
        return cls(outcome="refused", reason=reason)

    @property
    def ok(self) -> bool:
        return self.outcome == "succeeded"


@dataclass(frozen=True, slots=True)
class MigProfile:
    """A GPU instance profile the GPU offers: name (1g.10gb), id for -cgi, instances free and in all."""

    name: str
    profile_id: int
    free: int
    total: int
    memory_gib: float


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A GPU instance the GPU has now."""

    profile: str
    gpu_instance_id: int
    slot: int | None = None
    uuid: str | None = None


@dataclass(frozen=True, slots=True)
class MigListing:
    """A listing's profiles or instances, with the result of the command that read them."""

    result: DeviceResult
    profiles: tuple[MigProfile, ...] = ()
    instances: tuple[MigInstance, ...] = ()


def cut_output(text: str, *, limit: int = OUTPUT_LIMIT) -> str:
    """The text within `limit` bytes of UTF-8: its end, where errors are, marked as cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return "…" + data[-(limit - 3) :].decode(errors="ignore")


def profile_slices(name: str) -> int | None:
    """Compute slices of a profile name (3 for 3g.40gb), None when the name is not one."""
    found = _SLICES.match(name)
    return int(found.group(1)) if found else None


def memory_slices(profile: MigProfile, *, offered: Sequence[MigProfile]) -> int:
    """Memory slices one instance of a profile takes: its memory against the whole GPU's (the largest
    profile offered), so on an 80 GB card 1g.10gb 1, 1g.20gb and 2g.20gb 2, 3g and 4g.40gb 4, 7g.80gb 8."""
    whole = max((p.memory_gib for p in offered), default=0.0)
    if whole <= 0:
        return MEMORY_SLICES
    return min(MEMORY_SLICES, max(1, round(profile.memory_gib / whole * MEMORY_SLICES)))


def creation_order(offered: Sequence[MigProfile], wanted: Sequence[str]) -> list[str]:
    """The profiles of a valid layout in the order to create them: largest first (by memory, then
    compute), as the driver places each instance where the earlier ones left room."""
    by_name = {p.name: p for p in offered}

    def size(name: str) -> tuple[int, int, str]:
        slices = memory_slices(by_name[name], offered=offered)
        return (-slices, -(profile_slices(name) or 0), name)

    return sorted(wanted, key=size)


def layout_problem(offered: Sequence[MigProfile], wanted: Sequence[str]) -> str | None:
    """Why a layout cannot be made of the offered profiles (an unknown profile, more instances of one
    than the GPU has, more compute or memory slices than the GPU has), or None when it may be."""
    by_name = {p.name: p for p in offered}
    unknown = sorted({w for w in wanted if w not in by_name})
    if unknown:
        return f"unknown MIG profile(s) {', '.join(unknown)} (this GPU offers {', '.join(by_name) or 'none'})"
    for name, count in sorted(Counter(wanted).items()):
        if count > by_name[name].total:
            return f"{count} instances of {name} asked, the GPU has room for {by_name[name].total}"
    capacity = max((p.total for p in offered if profile_slices(p.name) == 1), default=None)
    used = sum(profile_slices(w) or 0 for w in wanted)
    if capacity is not None and used > capacity:
        return f"the layout needs {used} compute slices, the GPU has {capacity}"
    memory = sum(memory_slices(by_name[w], offered=offered) for w in wanted)
    if memory > MEMORY_SLICES:
        return f"the layout needs {memory} memory slices, the GPU has {MEMORY_SLICES}"
    return None
