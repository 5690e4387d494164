"""The agent's device actions: a GPU reset or node reboot recovery asks for, and the MIG layouts inventory
sets, carried out one at a time through the setup's DeviceActions and reported as HostActionDoneV1.

Each runs beside the ticks (a GPU reset may take a minute). Before any action the placement book is asked:
a GPU a workload still holds (or may still run on) is never touched. Partition changes are desired states:
history replays every one at start, only the latest per GPU is applied, once the whole history is read (the
book then knows every placement), and not at all when the GPU already has it. A layout refused because its
GPU was busy is kept and tried again at each tick until it is applied or a later change replaces it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any

from libs.common.events import Event
from libs.common.events.agent import DeviceAction, HostActionDoneV1, HostActionRequestedV1
from libs.common.events.inventory import GpuPartitionsChangedV1
from services.telemetry.domain.devices import DeviceResult
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.reports import node_discovered
from services.telemetry.service.agent.setup import AgentSetup

__all__ = ["HostDevices"]

log = logging.getLogger(__name__)


class HostDevices:
    """The agent's device actions; what they report goes out through ``send`` (the agent's next flush)."""

    def __init__(
        self,
        *,
        setup: AgentSetup,
        book: PlacementBook,
        clock: Callable[[], datetime],
        send: Callable[[Event], None],
    ) -> None:
        self._setup = setup
        self._book = book
        self._clock = clock
        self._send = send
        self._devices = asyncio.Lock()  # device actions run one at a time on a host
        self._tasks: set[asyncio.Task[HostActionDoneV1 | None]] = set()
        # The latest partitions change not applied yet, per GPU: (its event id, the change).
        self._layouts: dict[str, tuple[str, GpuPartitionsChangedV1]] = {}
        self._queued: set[str] = set()  # GPUs whose layout is spawned and waits for its turn
        self._told_busy: dict[str, str] = {}  # GPU -> event id of its layout reported refused as busy
        self._caught_up = False  # the intake has applied the whole history (actions wait for it)
        self._requests: list[HostActionRequestedV1] = []  # asked before it had

    def requested(self, event: HostActionRequestedV1) -> None:
        """Reset a GPU or reboot a node of this agent's, beside the ticks (another agent's: ignored);
        before the whole history is read, once it is (only then does the book know every placement)."""
        if event.node not in self._setup.discoveries:
            return
        if self._caught_up:
            self._spawn(self.host_action(event))
        else:
            self._requests.append(event)

    def partitions_changed(self, event: GpuPartitionsChangedV1, event_id: str) -> None:
        """Inventory changed a GPU's partitions: bring its MIG layout there, beside the ticks. Only the
        latest change per GPU is applied (history replays every one)."""
        self._layouts[event.gpu_uuid] = (event_id, event)
        self._apply_soon(event.gpu_uuid)

    def caught_up(self) -> None:
        """The intake has applied the whole history: the actions asked meanwhile and the latest layouts
        it left are carried out now."""
        self._caught_up = True
        requests, self._requests = self._requests, []
        for event in requests:
            self._spawn(self.host_action(event))
        for gpu_uuid in list(self._layouts):
            self._apply_soon(gpu_uuid)

    def retry_layouts(self) -> None:
        """Try again the layouts kept because their GPU was busy, once it is free (at each tick)."""
        for gpu_uuid in [g for g in self._layouts if not self._book.holding(g)]:
            self._apply_soon(gpu_uuid)

    def _apply_soon(self, gpu_uuid: str) -> None:
        if self._caught_up and gpu_uuid not in self._queued:
            self._queued.add(gpu_uuid)
            self._spawn(self.apply_layout(gpu_uuid))

    def _spawn(self, action: Coroutine[Any, Any, HostActionDoneV1 | None]) -> None:
        task = asyncio.create_task(action)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_crash)

    async def settled(self) -> None:
        """Wait for the device actions under way (a command cut short may leave a GPU half done)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def host_action(self, event: HostActionRequestedV1) -> HostActionDoneV1:
        """Carry out a reset or reboot recovery asked for, unless a workload still holds a GPU it would
        touch, and report it (HostActionDoneV1, sent with the next flush)."""
        discovery = self._setup.discoveries.get(event.node)
        node_gpus = tuple(g.uuid for g in discovery.gpus) if discovery is not None else ()
        async with self._devices:
            result: DeviceResult | None
            if event.gpu_uuid is not None and event.gpu_uuid not in node_gpus:
                result = DeviceResult.refused(f"no GPU {event.gpu_uuid} on {event.node}")
            else:
                result = self._busy(node_gpus if event.gpu_uuid is None else (event.gpu_uuid,))
            if result is None:
                result = await self._act(event)
        return self._done(
            command_id=event.command_id,
            incident_id=event.incident_id,
            node=event.node,
            gpu_uuid=event.gpu_uuid,
            action=event.action,
            result=result,
        )

    async def _act(self, event: HostActionRequestedV1) -> DeviceResult:
        devices = self._setup.devices
        if devices is None:
            return DeviceResult.refused("this agent has no device actions")
        if event.gpu_uuid is not None:
            return await devices.reset_gpu(gpu_uuid=event.gpu_uuid)
        return await devices.reboot_node(node=event.node)

    async def apply_layout(self, gpu_uuid: str) -> HostActionDoneV1 | None:
        """Apply the latest partitions change of a GPU: nothing when its MIG layout is already so (a
        change replayed at start) or the change is no MIG layout; else the new layout, refused when a
        workload holds the GPU or the layout is invalid; after it, the node is discovered and announced
        again (its new instances and their UUIDs)."""
        async with self._devices:
            self._queued.discard(gpu_uuid)
            pending = self._layouts.pop(gpu_uuid, None)
            if pending is None:
                return None  # a later change was applied already
            event_id, change = pending
            wanted = sorted(p.profile for p in change.partitions if p.kind == "mig" and p.profile)
            devices = self._setup.devices
            if not change.mig_enabled:
                return None  # MIG mode is never toggled here; time slices are not a device action
            if devices is not None:
                now = await devices.mig_instances(gpu_uuid=gpu_uuid)
                if now.result.ok and sorted(i.profile for i in now.instances) == wanted:
                    log.info("MIG layout of %s is already %s", gpu_uuid, wanted)
                    return None
            result = self._busy((gpu_uuid,))
            if result is not None:
                if not self._keep_refused(gpu_uuid, pending):
                    return None
            else:
                if devices is None:
                    result = DeviceResult.refused("this agent has no device actions")
                else:
                    result = await devices.apply_mig(gpu_uuid=gpu_uuid, profiles=wanted)
                self._told_busy.pop(gpu_uuid, None)
                if result.ok:
                    await self._rediscover(change.node, gpu_uuid=gpu_uuid)
        return self._done(
            command_id=event_id,
            incident_id=None,
            node=change.node,
            gpu_uuid=gpu_uuid,
            action="apply_mig",
            result=result,
        )

    def _keep_refused(self, gpu_uuid: str, pending: tuple[str, GpuPartitionsChangedV1]) -> bool:
        """Keep a layout its GPU's workloads refused, for the next tick (unless a later change came
        meanwhile); whether to report the refusal (the first time only)."""
        event_id, _ = pending
        self._layouts.setdefault(gpu_uuid, pending)
        if self._told_busy.get(gpu_uuid) == event_id:
            return False
        self._told_busy[gpu_uuid] = event_id
        return True

    def _busy(self, gpus: Sequence[str]) -> DeviceResult | None:
        """A refusal when a workload of the book still holds one of these GPUs, or may still run on it
        (ended or moved away, its exit or last report still to come)."""
        busy = [g for g in gpus if self._book.holding(g)]
        workloads = sorted({w for g in busy for w in self._book.holders(g)})
        if not workloads:
            return None
        return DeviceResult.refused(f"GPU busy: workload {', '.join(workloads)}")

    async def _rediscover(self, node: str, *, gpu_uuid: str) -> None:
        """Discover a node again after its layout changed and announce it; the GPU's fleet-file layout
        no longer applies (the device's own view now holds it)."""
        probe = self._setup.probes.get(node)
        if probe is None:
            return
        self._setup.discoveries = {**self._setup.discoveries, node: await probe.discover()}
        self._setup.mig = {g: layout for g, layout in self._setup.mig.items() if g != gpu_uuid}
        self._send(
            node_discovered(
                discovery=self._setup.discoveries[node],
                labels=self._setup.labels.get(node, {}),
                models=self._setup.models,
                mig=self._setup.mig,
                source=self._setup.source,
            )
        )

    def _done(
        self,
        *,
        command_id: str,
        incident_id: str | None,
        node: str,
        gpu_uuid: str | None,
        action: DeviceAction,
        result: DeviceResult,
    ) -> HostActionDoneV1:
        """Report a device action (sent with the next flush) and log it."""
        done = HostActionDoneV1(
            command_id=command_id,
            incident_id=incident_id,
            node=node,
            gpu_uuid=gpu_uuid,
            action=action,
            outcome=result.outcome,
            reason=result.reason,
            commands=[list(argv) for argv in result.commands],
            exit_code=result.exit_code,
            output=result.output,
            at=self._clock(),
        )
        self._send(done)
        level = logging.INFO if result.ok else logging.WARNING
        log.log(level, "%s of %s: %s %s", action, gpu_uuid or node, result.outcome, result.reason)
        return done


def _log_crash(task: asyncio.Task[HostActionDoneV1 | None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("a device action failed unexpectedly", exc_info=exc)
