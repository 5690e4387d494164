"""NvmlProbe: the GpuProbe over NVML (pynvml), for real NVIDIA hosts.

Lazy nvmlInit on first use; every blocking call runs in a worker thread (asyncio.to_thread); a GPU that
NVML reports lost becomes a GpuLost reading; a host without a usable driver raises NvmlUnavailable.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pynvml

from services.telemetry.adapters.nvml_gpm import GpmTensorActivity
from services.telemetry.adapters.nvml_read import (
    GpuLostError,
    NvmlStats,
    Reader,
    handle_key,
    text,
    xid_instance,
)
from services.telemetry.domain.metrics import GpuLost, GpuReading, XidEvent
from services.telemetry.domain.probe import GpuInfo, NodeDiscovery, ProbeError

__all__ = ["NvmlProbe", "NvmlUnavailable"]

_UNAVAILABLE = (
    pynvml.NVMLError_LibraryNotFound,
    pynvml.NVMLError_DriverNotLoaded,
    pynvml.NVMLError_NoPermission,
    pynvml.NVMLError_LibRmVersionMismatch,
)
MAX_XIDS_PER_POLL = 64  # bounds one poll even during an XID storm


class NvmlUnavailable(ProbeError):
    """NVML cannot be used on this host: no NVIDIA driver/library, driver not loaded or no permission."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class NvmlProbe:
    """Reads the local node's NVIDIA GPUs through NVML."""

    def __init__(
        self, *, hostname: str | None = None, clock: Callable[[], datetime] = _utc_now, xid_wait_ms: int = 50
    ) -> None:
        self._hostname = hostname
        self._clock = clock
        self._xid_wait_ms = xid_wait_ms
        self._reader = Reader()
        self._gpm = GpmTensorActivity(query=self._reader.query, stats=self._reader.stats)
        self._lock = threading.Lock()
        self._initialised = False
        self._discovery: NodeDiscovery | None = None
        self._handles: list[Any] = []
        self._mig_handles: list[list[Any]] = []
        self._lost: dict[str, str] = {}
        self._uuid_by_handle: dict[int, str] = {}
        self._event_set: Any = None

    @property
    def stats(self) -> NvmlStats:
        """Unsupported fields and errors seen so far, by field name."""
        return self._reader.stats

    async def discover(self) -> NodeDiscovery:
        return await asyncio.to_thread(self._discover_sync)

    async def sample(self) -> list[GpuReading]:
        return await asyncio.to_thread(self._sample_sync)

    async def poll_xids(self) -> list[XidEvent]:
        return await asyncio.to_thread(self._poll_xids_sync)

    async def close(self) -> None:
        await asyncio.to_thread(self._close_sync)

    def _ensure_init(self) -> None:
        with self._lock:
            if self._initialised:
                return
            try:
                pynvml.nvmlInit()
            except _UNAVAILABLE as exc:
                raise NvmlUnavailable(f"NVML is not usable on this host: {exc}") from exc
            self._initialised = True

    def _discover_sync(self) -> NodeDiscovery:
        self._ensure_init()
        gpus: list[GpuInfo] = []
        self._handles, self._mig_handles = [], []
        for index in range(int(pynvml.nvmlDeviceGetCount())):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                info = self._reader.gpu_info(handle=handle, index=index)
            except (GpuLostError, pynvml.NVMLError_GpuIsLost):
                self._reader.stats.errors["lost_at_discovery"] += 1
                continue  # no UUID can be read; inventory learns of it through the missing index
            gpus.append(info)
            self._uuid_by_handle[handle_key(handle)] = info.uuid
            self._handles.append(handle)
            self._mig_handles.append(self._mig_handles_of(handle, info))
        driver = self._reader.query("driver", pynvml.nvmlSystemGetDriverVersion)
        self._discovery = NodeDiscovery(
            hostname=self._hostname or socket.gethostname(),
            driver_version=None if driver is None else text(driver),
            gpus=tuple(gpus),
        )
        return self._discovery

    def _mig_handles_of(self, handle: Any, info: GpuInfo) -> list[Any]:
        out: list[Any] = []
        for i in range(len(info.mig_instances)):
            mig = self._reader.query("mig_handle", pynvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
            if mig is not None:
                out.append(mig)
        return out

    def _discovered(self) -> NodeDiscovery:
        return self._discovery if self._discovery is not None else self._discover_sync()

    def _sample_sync(self) -> list[GpuReading]:
        discovery = self._discovered()
        now = self._clock()
        readings: list[GpuReading] = []
        for info, handle, migs in zip(discovery.gpus, self._handles, self._mig_handles, strict=True):
            readings.append(
                self._read_one(info=info, handle=handle, migs=migs, node=discovery.hostname, now=now)
            )
        return readings

    def _read_one(
        self, *, info: GpuInfo, handle: Any, migs: list[Any], node: str, now: datetime
    ) -> GpuReading:
        # A lost GPU stays lost until the node is reset: NVML will not answer for it again.
        if info.uuid not in self._lost:
            try:
                tensor = self._gpm.read(handle)
                return self._reader.sample(
                    handle=handle, info=info, node=node, now=now, mig_handles=migs, tensor_active_pct=tensor
                )
            except GpuLostError as exc:
                self._lost[info.uuid] = f"NVML: {exc}"
        return GpuLost(
            gpu_uuid=info.uuid, node=node, index=info.index, timestamp=now, reason=self._lost[info.uuid]
        )

    def _poll_xids_sync(self) -> list[XidEvent]:
        discovery = self._discovered()
        if self._event_set is None:
            self._event_set = self._register_xid_events()
        events: list[XidEvent] = []
        wait_ms = self._xid_wait_ms
        while len(events) < MAX_XIDS_PER_POLL:
            try:
                data = pynvml.nvmlEventSetWait_v2(self._event_set, wait_ms)
            except pynvml.NVMLError_Timeout:
                break
            except pynvml.NVMLError:
                self._reader.stats.errors["xid_wait"] += 1
                break
            events.append(self._xid_event(data, node=discovery.hostname))
            wait_ms = 0  # drain what is queued without waiting again
        return events

    def _register_xid_events(self) -> Any:
        event_set = pynvml.nvmlEventSetCreate()
        for handle in self._handles:
            try:
                pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
            except pynvml.NVMLError:
                # Some boards (or MIG mode on older drivers) refuse XID events; sampling still works.
                self._reader.stats.unsupported["xid_events"] += 1
        return event_set

    def _xid_event(self, data: Any, *, node: str) -> XidEvent:
        # Map the handle to our discovered UUID: asking NVML for the UUID of a GPU that just raised
        # XID 79 would fail, because it is gone.
        return XidEvent(
            gpu_uuid=self._uuid_by_handle.get(handle_key(data.device), "unknown"),
            node=node,
            xid=int(data.eventData),
            timestamp=self._clock(),
            gpu_instance_id=xid_instance(int(data.gpuInstanceId)),
            compute_instance_id=xid_instance(int(data.computeInstanceId)),
        )

    def _close_sync(self) -> None:
        with self._lock:
            if not self._initialised:
                return
            if self._event_set is not None:
                self._reader.query("event_set_free", pynvml.nvmlEventSetFree, self._event_set)
                self._event_set = None
            self._gpm.close()
            self._reader.query("shutdown", pynvml.nvmlShutdown)
            self._initialised = False
