"""Repartitioning a GPU: MIG layouts and time-slicing ratios, only while nothing is allocated on it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from services.inventory.domain.catalog import Catalog
from services.inventory.domain.errors import ReconfigurationConflictError, TimeSliceRefusedError
from services.inventory.domain.mig import MigPlacement, MigRequest, place_layout
from services.inventory.domain.records import Allocation, Gpu, Partition, PartitionKind, TimeSliceConfig
from services.inventory.domain.timeslice import WorkloadKind, decide_time_slice
from services.inventory.domain.units import (
    DEFAULT_BASIS,
    UnitBasis,
    mig_profile_units,
    time_slice_share_units,
)

__all__ = [
    "mig_partitions",
    "name_mig_devices",
    "reconfigure_mig",
    "set_time_slice",
    "time_slice_partitions",
]


def mig_partitions(
    *,
    gpu_uuid: str,
    model: str,
    placements: Sequence[MigPlacement],
    catalog: Catalog,
    basis: UnitBasis = DEFAULT_BASIS,
) -> tuple[Partition, ...]:
    """Partition records for placed MIG instances; ids are stable (uuid, profile, slot)."""
    spec = catalog.get(model)
    return tuple(
        Partition(
            id=f"{gpu_uuid}/mig/{p.label}",
            gpu_uuid=gpu_uuid,
            kind=PartitionKind.MIG,
            profile=p.profile,
            start=p.start,
            units=mig_profile_units(model=spec.name, profile=p.profile, catalog=catalog, basis=basis),
            memory_mib=spec.mig_profile(p.profile).memory_gb * 1024,
        )
        for p in placements
    )


def name_mig_devices(
    partitions: Sequence[Partition],
    *,
    instances: Sequence[MigRequest],
    device_uuids: Sequence[str | None],
) -> tuple[Partition, ...]:
    """The MIG partitions with the device UUID of the discovered instance at the same profile and slot.

    An instance reported without its slot names the partition only where it is the one instance of its
    profile; a partition no reported UUID names keeps None. Partition ids do not change.
    """
    named: dict[tuple[str, int], str] = {}
    counts: dict[str, int] = {}
    for found in instances:
        counts[found.profile] = counts.get(found.profile, 0) + 1
    for found, device in zip(instances, device_uuids, strict=False):
        if device is None:
            continue
        if found.start is not None:
            named[(found.profile, found.start)] = device
            continue
        same = [p for p in partitions if p.profile == found.profile and p.start is not None]
        if counts[found.profile] == 1 and len(same) == 1 and same[0].start is not None:
            named[(found.profile, same[0].start)] = device
    return tuple(
        p.model_copy(update={"device_uuid": named.get((p.profile, p.start))})
        if p.kind is PartitionKind.MIG and p.profile is not None and p.start is not None
        else p
        for p in partitions
    )


def time_slice_partitions(*, gpu: Gpu, ratio: int) -> tuple[Partition, ...]:
    """One partition per share; ratio 1 means no sharing and yields none."""
    if ratio == 1:
        return ()
    units = time_slice_share_units(gpu_units=gpu.units, ratio=ratio)
    return tuple(
        Partition(
            id=f"{gpu.uuid}/ts/{share}-of-{ratio}",
            gpu_uuid=gpu.uuid,
            kind=PartitionKind.TIME_SLICE,
            ratio=ratio,
            share=share,
            units=units,
            memory_mib=gpu.memory_mib // ratio,
        )
        for share in range(ratio)
    )


def _require_idle(gpu: Gpu, allocations: Iterable[Allocation], what: str) -> None:
    holding = sorted(a.allocation_id for a in allocations if a.gpu_uuid == gpu.uuid)
    if holding:
        raise ReconfigurationConflictError(
            f"cannot {what} GPU {gpu.uuid}: {len(holding)} allocation(s) hold it ({', '.join(holding[:5])})"
        )


def reconfigure_mig(
    *,
    gpu: Gpu,
    requests: Sequence[MigRequest],
    catalog: Catalog,
    allocations: Iterable[Allocation],
    basis: UnitBasis = DEFAULT_BASIS,
) -> Gpu:
    """Repartition an idle GPU into `requests` (empty: MIG off); refused while any allocation holds it."""
    _require_idle(gpu, allocations, "reconfigure MIG on")
    if not requests:
        return gpu.model_copy(update={"mig_enabled": False, "partitions": ()})
    placements = place_layout(model=catalog.get(gpu.model), requests=requests)
    partitions = mig_partitions(
        gpu_uuid=gpu.uuid, model=gpu.model, placements=placements, catalog=catalog, basis=basis
    )
    # MIG and time-slicing are exclusive here: a MIG instance is already an isolated share.
    return gpu.model_copy(update={"mig_enabled": True, "partitions": partitions, "time_slice": None})


def set_time_slice(
    *,
    gpu: Gpu,
    ratio: int,
    workload_kind: WorkloadKind,
    allocations: Iterable[Allocation],
) -> Gpu:
    """Share an idle, non-MIG GPU `ratio` ways; the decision's warnings stay on the config."""
    decision = decide_time_slice(ratio=ratio, workload_kind=workload_kind)
    if gpu.mig_enabled:
        raise TimeSliceRefusedError(f"GPU {gpu.uuid} is in MIG mode; disable MIG before time-slicing it")
    _require_idle(gpu, allocations, "change time-slicing of")
    config = None
    if ratio > 1:
        config = TimeSliceConfig(ratio=ratio, workload_kind=workload_kind, warnings=decision.warnings)
    return gpu.model_copy(
        update={"time_slice": config, "partitions": time_slice_partitions(gpu=gpu, ratio=ratio)}
    )
