"""Device actions on the simulated fleet: a reset or reboot undoes injected faults (except those
injected to survive it), and a MIG layout changes the simulated GPU, so rediscovery reports it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.telemetry.adapters.sim import SimFleet, UnknownGpu
from services.telemetry.domain.devices import (
    DeviceResult,
    MigInstance,
    MigListing,
    MigProfile,
    creation_order,
    layout_problem,
)
from services.telemetry.domain.gpu_models import GIB, GpuModelSpec

__all__ = ["SimDeviceActions", "sim_profiles"]

#: (compute slices, memory eighths, instances on one GPU, NVIDIA's profile id) of the A100/H100 family.
_FAMILY = ((1, 1, 7, 19), (2, 2, 3, 14), (3, 4, 2, 9), (4, 4, 1, 5), (7, 8, 1, 0))
_NO_FAULT_CLEARED = "the GPU is still faulty after the action"


def sim_profiles(spec: GpuModelSpec) -> tuple[MigProfile, ...]:
    """The GPU instance profiles a MIG-capable model offers, named by memory as NVIDIA names them
    (1g.10gb ... 7g.80gb on an 80 GB card); none for a model without MIG."""
    if not spec.mig_capable:
        return ()
    gib = spec.memory_bytes / GIB
    return tuple(
        MigProfile(
            name=f"{compute}g.{int(gib * eighths / 8 + 0.5)}gb",
            profile_id=profile_id,
            free=total,
            total=total,
            memory_gib=round(gib * eighths / 8, 2),
        )
        for compute, eighths, total, profile_id in _FAMILY
    )


class SimDeviceActions:
    """DeviceActions over a SimFleet. ``layouts`` are the fleet file's MIG layouts (profile@slot), what a
    GPU has until a layout is applied to it."""

    def __init__(self, *, fleet: SimFleet, layouts: Mapping[str, Sequence[str]] | None = None) -> None:
        self._fleet = fleet
        self._layouts = dict(layouts or {})

    async def mig_profiles(self, *, gpu_uuid: str) -> MigListing:
        try:
            spec = self._fleet.gpu(gpu_uuid).spec
        except UnknownGpu:
            return MigListing(result=_failed(f"no GPU {gpu_uuid} on this host"))
        if not spec.mig_capable:
            return MigListing(result=_failed(f"{spec.name} ({gpu_uuid}) does not support MIG"))
        return MigListing(result=DeviceResult(outcome="succeeded", exit_code=0), profiles=sim_profiles(spec))

    async def mig_instances(self, *, gpu_uuid: str) -> MigListing:
        listing = await self.mig_profiles(gpu_uuid=gpu_uuid)
        if not listing.result.ok:
            return listing
        gpu = self._fleet.gpu(gpu_uuid)
        if gpu.mig is not None:
            instances = tuple(MigInstance(m.profile, m.gpu_instance_id, m.slot, m.uuid) for m in gpu.mig)
        else:
            instances = tuple(
                MigInstance(profile=text.partition("@")[0].strip(), gpu_instance_id=n)
                for n, text in enumerate(self._layouts.get(gpu_uuid, ()), start=1)
            )
        return MigListing(result=listing.result, instances=instances)

    async def apply_mig(self, *, gpu_uuid: str, profiles: Sequence[str]) -> DeviceResult:
        listing = await self.mig_profiles(gpu_uuid=gpu_uuid)
        if not listing.result.ok:
            return listing.result
        problem = layout_problem(listing.profiles, profiles)
        if problem is not None:
            return DeviceResult.refused(problem)
        memory = {p.name: int(p.memory_gib * GIB) for p in listing.profiles}
        ordered = creation_order(listing.profiles, profiles)
        self._fleet.apply_mig(gpu_uuid=gpu_uuid, instances=[(p, memory[p]) for p in ordered])
        return DeviceResult(outcome="succeeded", exit_code=0, output=f"{len(ordered)} GPU instance(s)\n")

    async def reset_gpu(self, *, gpu_uuid: str) -> DeviceResult:
        try:
            cleared = self._fleet.clear_faults(gpu_uuid=gpu_uuid)
        except UnknownGpu:
            return _failed(f"no GPU {gpu_uuid} on this host")
        return DeviceResult(outcome="succeeded", exit_code=0, output="" if cleared else _NO_FAULT_CLEARED)

    async def reboot_node(self, *, node: str) -> DeviceResult:
        gpus = self._fleet.gpus_of(node)
        if not gpus:
            return _failed(f"no node {node} on this host")
        held = [g for g in gpus if not self._fleet.clear_faults(gpu_uuid=g)]
        return DeviceResult(
            outcome="succeeded", exit_code=0, output=f"{_NO_FAULT_CLEARED}: {', '.join(held)}" if held else ""
        )


def _failed(reason: str) -> DeviceResult:
    return DeviceResult(outcome="failed", reason=reason)
