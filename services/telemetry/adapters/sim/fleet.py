"""A simulated GPU fleet: state of every GPU and workload, advanced only by the times passed in."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from services.telemetry.adapters.sim import faults
from services.telemetry.adapters.sim.faults import FaultKind
from services.telemetry.adapters.sim.gpu import SimGpu, SimMigInstance, combine, read, step, values
from services.telemetry.adapters.sim.ids import GPU_UUID_NAMESPACE, gpu_uuid
from services.telemetry.adapters.sim.physics import IDLE, PROFILES, Load, ProfileKind, profile_load
from services.telemetry.adapters.sim.spec import FleetSpec
from services.telemetry.adapters.sim.workloads import Phase, SimWorkload, WorkloadPlayer, WorkloadReport
from services.telemetry.domain.gpu_models import GPU_MODELS
from services.telemetry.domain.metrics import GpuReading, XidEvent
from services.telemetry.domain.probe import GpuInfo, MigInstanceInfo, NodeDiscovery

__all__ = ["SimFleet", "UnknownGpu"]


class UnknownGpu(KeyError):
    """A command named a GPU the fleet does not have."""


class SimFleet:
    """Every simulated node and GPU, plus the workloads placed on them."""

    def __init__(self, *, spec: FleetSpec, start: datetime, speed: float = 1.0) -> None:
        self.spec = spec
        self.player = WorkloadPlayer(speed=speed)
        self._speed = speed
        self._nodes: dict[str, list[SimGpu]] = {}
        self._gpus: dict[str, SimGpu] = {}
        self._xids: dict[str, list[XidEvent]] = {}
        self._mig_generation = 0  # MIG layouts applied so far: each gives fresh MIG UUIDs
        t0 = self._t0 = start.timestamp()
        for node in spec.nodes:
            rng = random.Random(f"{spec.seed}:{node.hostname}")  # per node: call order never changes values
            models = [GPU_MODELS[g.model] for g in node.gpus for _ in range(g.count)]
            gpus = [
                SimGpu(
                    uuid=gpu_uuid(hostname=node.hostname, index=i),
                    node=node.hostname,
                    index=i,
                    spec=m,
                    t=t0,
                    rng=rng,
                )
                for i, m in enumerate(models)
            ]
            self._nodes[node.hostname] = gpus
            self._xids[node.hostname] = []
            self._gpus.update((g.uuid, g) for g in gpus)

    @property
    def hostnames(self) -> tuple[str, ...]:
        """Every node's hostname, in fleet order."""
        return tuple(self._nodes)

    def gpu(self, gpu_uuid: str) -> SimGpu:
        """One GPU's live state (for tests and the admin API)."""
        try:
            return self._gpus[gpu_uuid]
        except KeyError:
            raise UnknownGpu(gpu_uuid) from None

    def discovery(self, *, hostname: str) -> NodeDiscovery:
        """What NVML discovery would report for a node: NVLink all-to-all among NVLink-capable models."""
        gpus = self._nodes[hostname]
        bus = {g.uuid: f"00000000:{0x18 + g.index:02X}:00.0" for g in gpus}  # as inventory's fleet files
        linked = [g for g in gpus if g.spec.mig_capable]  # SXM boards with NVSwitch in our table
        return NodeDiscovery(
            hostname=hostname,
            driver_version="sim",
            gpus=tuple(
                GpuInfo(
                    uuid=g.uuid,
                    index=g.index,
                    model_name=f"NVIDIA {g.spec.name}",
                    memory_bytes=g.spec.memory_bytes,
                    pci_bus_id=bus[g.uuid],
                    mig_enabled=(g.mig is not None) if g.spec.mig_capable else None,
                    nvlink_peers=tuple(bus[p.uuid] for p in linked if p is not g and g in linked),
                    mig_instances=tuple(
                        MigInstanceInfo(
                            mig_uuid=m.uuid,
                            gpu_instance_id=m.gpu_instance_id,
                            compute_instance_id=0,
                            memory_bytes=m.memory_bytes,
                            profile=m.profile,
                            slot=m.slot,
                        )
                        for m in g.mig or ()
                    ),
                )
                for g in gpus
            ),
        )

    def sample_node(self, *, hostname: str, now: datetime) -> list[GpuReading]:
        """Advance a node's GPUs to `now` and read them: one reading per GPU."""
        return [read(gpu, now=now) for gpu in self._advance(hostname=hostname, now=now)]

    def sample_node_values(self, *, hostname: str, now: datetime) -> list[GpuReading | tuple[Any, ...]]:
        """sample_node for the agent's fast path: a GPU that answers comes as values(gpu), a lost one
        as its GpuLost reading."""
        return [
            values(gpu) if gpu.lost is None else read(gpu, now=now)
            for gpu in self._advance(hostname=hostname, now=now)
        ]

    def _advance(self, *, hostname: str, now: datetime) -> list[SimGpu]:
        """Step every answering GPU of a node to `now` (random faults, workloads' load, settling)."""
        t = self._physics_time(now)
        rate = self.spec.fault_rate_per_gpu_hour
        gpus = self._nodes[hostname]
        placed = self.player.placed_gpus
        for gpu in gpus:
            if gpu.lost is None:
                if rate and gpu.rng.random() < rate * (t - gpu.t) / 3600.0:
                    kind, xid = faults.random_fault(gpu.rng)
                    faults.apply_fault(gpu, fault=kind, xid=xid)
                step(gpu, t=t, load=self._load(gpu) if gpu.uuid in placed else IDLE)
                if gpu.raised_xids or gpu.oom:
                    self._settle(gpu, now=now)
        return gpus

    def poll_xids(self, *, hostname: str) -> list[XidEvent]:
        """XID events raised on a node since the previous poll."""
        events, self._xids[hostname] = self._xids[hostname], []
        return events

    def inject_fault(
        self,
        *,
        gpu_uuid: str,
        fault: FaultKind,
        now: datetime,
        xid: int | None = None,
        leak_pct_per_min: float | None = None,
        survives_reset: bool = False,
    ) -> None:
        """Inject a fault now; XIDs it raises are queued and kill workloads where they would.

        ``leak_pct_per_min``: a memory leak's growth in simulated time (None: the default creep).
        ``survives_reset``: a reset or reboot (clear_faults) leaves the GPU faulty.
        """
        gpu = self.gpu(gpu_uuid)
        faults.apply_fault(
            gpu, fault=fault, xid=xid, leak_pct_per_min=leak_pct_per_min, survives_reset=survives_reset
        )
        self._settle(gpu, now=now)

    def node_of(self, gpu_uuid: str) -> str:
        """The hostname of a GPU of this fleet (UnknownGpu otherwise)."""
        return self.gpu(gpu_uuid).node

    def gpus_of(self, hostname: str) -> tuple[str, ...]:
        """The GPUs of one node of this fleet (none for another agent's node)."""
        return tuple(g.uuid for g in self._nodes.get(hostname, ()))

    def clear_faults(self, *, gpu_uuid: str) -> bool:
        """Undo injected faults on a GPU, as a reset would; False when a fault survives it."""
        return faults.clear_faults(self.gpu(gpu_uuid))

    def apply_mig(self, *, gpu_uuid: str, instances: Sequence[tuple[str, int]]) -> None:
        """Give a MIG-capable GPU these GPU instances, (profile, memory bytes) each, in placement order:
        new instance ids, start slots and MIG UUIDs, as a reconfiguration on a real GPU gives."""
        gpu = self.gpu(gpu_uuid)
        if not gpu.spec.mig_capable:
            raise ValueError(f"{gpu.spec.name} ({gpu_uuid}) has no MIG")
        self._mig_generation += 1
        layout, slot = [], 0
        for n, (profile, memory_bytes) in enumerate(instances, start=1):
            mig = uuid.uuid5(GPU_UUID_NAMESPACE, f"{gpu_uuid}/mig/{self._mig_generation}/{n}")
            layout.append(SimMigInstance(profile, n, slot, f"MIG-{mig}", memory_bytes))
            slot += _memory_slices(profile)
        gpu.mig = tuple(layout)

    def assign_workload(
        self,
        *,
        gpu_uuid: str,
        workload_id: str,
        kind: ProfileKind,
        started_at: datetime,
        duration_s: float | None = None,
    ) -> None:
        """Place a workload; it starts after its start-up delay and runs duration_s (None = a service)."""
        gpu = self.gpu(gpu_uuid)
        wl = self.player.assign(
            gpu_uuid=gpu_uuid,
            workload_id=workload_id,
            kind=kind,
            started_at=started_at,
            duration_s=duration_s,
        )
        wl.memory_bytes = int(PROFILES[kind].memory_fraction * gpu.spec.memory_bytes)

    def release_workload(self, *, workload_id: str) -> None:
        """Take a workload away (the scheduler stopped or preempted it)."""
        self.player.release(workload_id=workload_id)

    def migrate_workload(self, *, workload_id: str, target_gpu_uuid: str, now: datetime) -> None:
        """Move a workload: checkpoint on the source, transfer, restore on the target."""
        self.gpu(target_gpu_uuid)
        self.player.migrate(workload_id=workload_id, target_gpu_uuid=target_gpu_uuid, now=now)

    def resume_workload(
        self, *, workload_id: str, target_gpu_uuid: str, kind: ProfileKind, now: datetime
    ) -> None:
        """Restore a workload killed by its GPU's fault on another GPU, from its last checkpoint."""
        memory = int(PROFILES[kind].memory_fraction * self.gpu(target_gpu_uuid).spec.memory_bytes)
        self.player.resume(
            workload_id=workload_id, gpu_uuid=target_gpu_uuid, kind=kind, memory_bytes=memory, now=now
        )

    def advance(self, *, now: datetime) -> list[WorkloadReport]:
        """Pure step of the workload player: started/finished/failed/progress reports up to `now`."""
        return self.player.advance(now=now)

    def _physics_time(self, now: datetime) -> float:
        """Time as the GPUs' physics sees it: wall time, run `speed` times faster since the start."""
        return self._t0 + (now.timestamp() - self._t0) * self._speed

    def _load(self, gpu: SimGpu) -> Load:
        placed = self.player.on_gpu(gpu.uuid)
        if not placed:
            return IDLE
        return combine([_workload_load(wl, rng=gpu.rng) for wl in placed])

    def _settle(self, gpu: SimGpu, *, now: datetime) -> None:
        """Turn what a step or fault raised into XID events and workload failures."""
        for xid in gpu.raised_xids:
            self._xids[gpu.node].append(XidEvent(gpu_uuid=gpu.uuid, node=gpu.node, xid=xid, timestamp=now))
            if xid in faults.WORKLOAD_FATAL_XIDS:
                self.player.fail_gpu(gpu_uuid=gpu.uuid, now=now, reason=f"XID {xid}")
        gpu.raised_xids.clear()
        if gpu.oom:
            gpu.oom = False
            self.player.fail_gpu(gpu_uuid=gpu.uuid, now=now, reason="CUDA out of memory")


def _memory_slices(profile: str) -> int:
    """Memory slices (of 8) a profile's GPU instance takes: 1g 1, 2g 2, 3g and 4g 4, 7g all 8."""
    compute = int(profile.partition("g")[0]) if profile[:1].isdigit() else 1
    return {1: 1, 2: 2, 3: 4, 4: 4}.get(compute, 8)


def _workload_load(wl: SimWorkload, *, rng: random.Random) -> Load:
    """What a workload asks of its GPU in its current phase."""
    fraction = PROFILES[wl.kind].memory_fraction
    if wl.phase is Phase.RUNNING:
        return profile_load(kind=wl.kind, rng=rng)
    if wl.phase is Phase.CHECKPOINT:
        return Load(20.0, 60.0, 0.3, fraction)  # device-to-host copy of the state
    if wl.phase is Phase.RESTORE:
        return Load(15.0, 50.0, 0.5, fraction)
    if wl.phase is Phase.STARTING:
        return Load(2.0, 1.0, 0.01, 0.1 * fraction)
    return IDLE  # TRANSFER: the source process exited, the target has not started
