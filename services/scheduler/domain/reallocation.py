"""A placement follows the devices its host gave it: which grants move, which other placement swaps.

The host (Kubernetes' device plugin) may give a workload other GPUs of its node than the scheduler placed
it on. The placement takes the reported devices; a device the scheduler thought another placement of the
node held is swapped, so that placement gets the devices this one gave up and every slot stays held once.

A reported device names a whole GPU by its UUID, or a MIG instance by its partition id or by the host's
``MIG-`` device UUID that inventory recorded for that partition (a MIG item whose GPU's UUID is reported
is taken as unchanged: the instance cannot be told from it). A MIG device UUID no partition of the node
carries is refused. A time-sliced share never moves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.scheduler.domain.cluster import WHOLE_SLOT, GpuMode, GpuView, Grant, SlotKind

__all__ = ["Reallocation", "Regrant", "follow_devices"]


@dataclass(frozen=True, slots=True)
class Regrant:
    """One placement's grants before and after."""

    placement_id: str
    before: tuple[Grant, ...]
    after: tuple[Grant, ...]


@dataclass(frozen=True, slots=True)
class Reallocation:
    """What a report of the host's devices changes: the reported placement first, then those swapped
    with it; nothing when the devices are the placed ones. ``refused`` says why nothing may change."""

    changes: tuple[Regrant, ...] = ()
    refused: str | None = None


@dataclass(frozen=True, slots=True)
class _Target:
    """The slot a reported device names."""

    device: str
    gpu: GpuView
    slot: str
    #: None: a GPU in MIG mode named by its own UUID (which of its instances cannot be told).
    kind: SlotKind | None
    profile: str = ""


class _Refused(Exception):
    pass


def follow_devices(
    *,
    placement_id: str,
    node: str,
    grants: Sequence[Grant],
    reported: Sequence[str],
    gpus: Mapping[str, GpuView],
    others: Mapping[str, Sequence[Grant]],
) -> Reallocation:
    """The grants of ``placement_id`` (on ``node``) moved onto the ``reported`` devices, one per grant.

    ``gpus`` are the node's GPUs as the fleet knows them; ``others`` the grants of every other placement of
    the node that holds its slots. Refused when the count differs, a device is not one of the node's, or
    it is of another model, MIG profile or kind than the grant it would replace.
    """
    try:
        return _follow(placement_id, node, grants, reported, gpus, others)
    except _Refused as refused:
        return Reallocation(refused=str(refused))


def _follow(
    pid: str,
    node: str,
    grants: Sequence[Grant],
    reported: Sequence[str],
    gpus: Mapping[str, GpuView],
    others: Mapping[str, Sequence[Grant]],
) -> Reallocation:
    if len(reported) != len(grants):
        raise _Refused(f"the host reported {len(reported)} devices for {len(grants)} allocations")
    for g in grants:
        if g.gpu not in gpus:
            raise _Refused(f"GPU {g.gpu} of placement {pid} is not a GPU of node {node} the fleet knows")
    left = list(reported)
    moving = [g for g in grants if not _keeps(g, left, gpus)]
    if not moving:
        return Reallocation()
    targets = [_target(d, node, gpus) for d in left]
    taken = {g.key for g in grants if g not in moving}
    moves: list[tuple[Grant, Grant]] = []
    for g in moving:
        t = _pick(g, targets, taken, gpus)
        taken.add((t.gpu.uuid, t.slot))
        moves.append((g, Grant(t.gpu.uuid, node, t.slot, g.units, g.kind)))
    return Reallocation(changes=_with_swaps(pid, grants, moves, others, gpus))


def _keeps(grant: Grant, left: list[str], gpus: Mapping[str, GpuView]) -> bool:
    """Whether a reported device names the slot this grant holds (that device is used up)."""
    names = [grant.gpu]
    if grant.kind is SlotKind.MIG:
        part = next((p for p in gpus[grant.gpu].partitions if p.id == grant.slot), None)
        device = [part.device_uuid] if part is not None and part.device_uuid else []
        names = [grant.slot, *device, grant.gpu]
    for name in names:
        if name in left:
            left.remove(name)
            return True
    return False


def _target(device: str, node: str, gpus: Mapping[str, GpuView]) -> _Target:
    gpu = gpus.get(device)
    if gpu is not None:
        kinds = {GpuMode.WHOLE: SlotKind.WHOLE, GpuMode.TIMESLICE: SlotKind.SHARE, GpuMode.MIG: None}
        return _Target(device, gpu, WHOLE_SLOT, kinds[gpu.mode])
    for gpu in gpus.values():
        for part in gpu.partitions:
            if device in (part.id, part.device_uuid):
                return _Target(device, gpu, part.id, SlotKind.MIG, part.profile)
    if device.startswith("MIG-"):
        raise _Refused(f"MIG device {device} is not recorded as an instance of node {node}")
    raise _Refused(f"device {device} is not a GPU of node {node}")


def _pick(
    grant: Grant, targets: list[_Target], taken: set[tuple[str, str]], gpus: Mapping[str, GpuView]
) -> _Target:
    """The first reported device that can replace the grant (each taken once), else why none can."""
    held = gpus[grant.gpu]
    profile = next((p.profile for p in held.partitions if p.id == grant.slot), "")
    reasons: list[str] = []
    for t in targets:
        why = _mismatch(grant, held.model, profile, t)
        if why is None and (t.gpu.uuid, t.slot) in taken:
            why = f"device {t.device} is reported twice"
        if why is None:
            targets.remove(t)
            return t
        reasons.append(why)
    raise _Refused(reasons[0] if reasons else f"no device reported for {grant.gpu}")


def _mismatch(grant: Grant, model: str, profile: str, t: _Target) -> str | None:
    if grant.kind is SlotKind.SHARE:
        return f"a time-sliced share of {grant.gpu} does not move (the host reported {t.device})"
    if t.kind is None:
        return f"device {t.device} is a GPU in MIG mode: which of its instances the host gave is not known"
    if t.kind is not grant.kind:
        return f"device {t.device} is a {_kind(t.kind)}, the allocation holds a {_kind(grant.kind)}"
    if t.gpu.model != model:
        return f"device {t.device} is a {t.gpu.model}, the allocation holds a {model}"
    if t.profile != profile:
        return f"device {t.device} is MIG profile {t.profile}, the allocation holds {profile}"
    return None


def _kind(kind: SlotKind) -> str:
    return {SlotKind.WHOLE: "whole GPU", SlotKind.MIG: "MIG instance", SlotKind.SHARE: "time-sliced GPU"}[
        kind
    ]


def _with_swaps(
    pid: str,
    grants: Sequence[Grant],
    moves: Sequence[tuple[Grant, Grant]],
    others: Mapping[str, Sequence[Grant]],
    gpus: Mapping[str, GpuView],
) -> tuple[Regrant, ...]:
    """The placement's change, then each other placement's: what it held of the new slots becomes the
    slots this one gave up."""
    holder = {g.key: (other, g) for other, held in others.items() for g in held}
    after = dict(moves)
    changed: dict[str, dict[Grant, Grant]] = {}
    for old, new in moves:
        found = holder.get(new.key)
        if found is None:
            continue
        other, theirs = found
        changed.setdefault(other, {})[theirs] = Grant(old.gpu, old.node, old.slot, theirs.units, theirs.kind)
    result = [Regrant(pid, tuple(grants), tuple(after.get(g, g) for g in grants))]
    for other, swaps in changed.items():
        held = tuple(others[other])
        for g in held:
            if g.gpu not in gpus:
                raise _Refused(f"GPU {g.gpu} of placement {other} is not a GPU of the node the fleet knows")
        result.append(Regrant(other, held, tuple(swaps.get(g, g) for g in held)))
    return tuple(result)
