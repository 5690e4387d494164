"""A scripted DeviceActions for unit tests: records every call, answers what the test programmed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from services.telemetry.domain.devices import (
    DeviceResult,
    MigInstance,
    MigListing,
    MigProfile,
    creation_order,
    layout_problem,
)

__all__ = ["FakeDeviceActions"]

OK = DeviceResult(outcome="succeeded", exit_code=0)


@dataclass
class FakeDeviceActions:
    """Every call lands in ``calls`` as (action, target, profiles); the GPUs offer ``profiles`` and have
    ``instances`` (an applied layout's are created largest first, as on a GPU); ``fail`` maps an action
    (reset_gpu, reboot_node, apply_mig) to the result it returns instead of succeeding;
    ``reboot_configured`` False refuses reboots as an unconfigured host does."""

    profiles: Mapping[str, Sequence[MigProfile]] = field(default_factory=dict)
    instances: dict[str, tuple[MigInstance, ...]] = field(default_factory=dict)
    fail: dict[str, DeviceResult] = field(default_factory=dict)
    reboot_configured: bool = True
    calls: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    carried_out: list[tuple[str, str]] = field(default_factory=list)  # (action, target) not refused

    async def mig_profiles(self, *, gpu_uuid: str) -> MigListing:
        self.calls.append(("mig_profiles", gpu_uuid, ()))
        if gpu_uuid not in self.profiles:
            return MigListing(result=DeviceResult(outcome="failed", reason=f"no MIG on {gpu_uuid}"))
        return MigListing(result=OK, profiles=tuple(self.profiles[gpu_uuid]))

    async def mig_instances(self, *, gpu_uuid: str) -> MigListing:
        self.calls.append(("mig_instances", gpu_uuid, ()))
        if gpu_uuid not in self.profiles:
            return MigListing(result=DeviceResult(outcome="failed", reason=f"no MIG on {gpu_uuid}"))
        return MigListing(result=OK, instances=self.instances.get(gpu_uuid, ()))

    async def apply_mig(self, *, gpu_uuid: str, profiles: Sequence[str]) -> DeviceResult:
        self.calls.append(("apply_mig", gpu_uuid, tuple(profiles)))
        if gpu_uuid not in self.profiles:
            return DeviceResult(outcome="failed", reason=f"no MIG on {gpu_uuid}")
        problem = layout_problem(self.profiles[gpu_uuid], profiles)
        if problem is not None:
            return DeviceResult.refused(problem)
        self.carried_out.append(("apply_mig", gpu_uuid))
        if "apply_mig" in self.fail:
            return self.fail["apply_mig"]
        self.instances[gpu_uuid] = tuple(
            MigInstance(profile=p, gpu_instance_id=n, uuid=f"MIG-fake-{gpu_uuid}-{n}")
            for n, p in enumerate(creation_order(self.profiles[gpu_uuid], profiles), start=1)
        )
        return OK

    async def reset_gpu(self, *, gpu_uuid: str) -> DeviceResult:
        self.calls.append(("reset_gpu", gpu_uuid, ()))
        self.carried_out.append(("reset_gpu", gpu_uuid))
        return self.fail.get("reset_gpu", OK)

    async def reboot_node(self, *, node: str) -> DeviceResult:
        self.calls.append(("reboot_node", node, ()))
        if not self.reboot_configured:
            return DeviceResult.refused("node reboot not configured (TELEMETRY_AGENT_REBOOT_COMMAND)")
        self.carried_out.append(("reboot_node", node))
        return self.fail.get("reboot_node", OK)
