"""Which GPUs (or MIG instances) a Pod actually got: the kubelet's device plugin chooses them.

Two views, read in this order (FirstOf): the Pod's environment and the node's NVML view. NVIDIA's device
plugin hands a container its devices as NVIDIA_VISIBLE_DEVICES (UUIDs with its default uuid strategy,
indices with the index one), so any process of the Pod (found by its cgroup path, below) shows them from
its first instant. The NVML view reads each device's compute processes and finds the Pod's UID in each
process's cgroup path (/proc/<pid>/cgroup: ``pod<uid>`` with the cgroupfs driver, ``pod<uid with _>``
with systemd's). It sees a device once the workload has opened it: a Pod that has not yet made a CUDA
context reads as none. pynvml is imported only when the NVML view first reads.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

__all__ = [
    "AssignedDevices",
    "EnvironAssignedDevices",
    "FakeAssignedDevices",
    "FirstOf",
    "NvmlAssignedDevices",
]


class AssignedDevices(Protocol):
    """Reads the devices a Pod was given on this node."""

    async def assigned(self, *, pod_uid: str) -> tuple[str, ...]:
        """The UUIDs of the GPUs and MIG instances the Pod's processes use, sorted; () when none is
        seen (yet)."""
        ...


class FakeAssignedDevices:
    """Pod UID -> device UUIDs, set by the test."""

    def __init__(self, devices: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.devices: dict[str, tuple[str, ...]] = dict(devices or {})

    async def assigned(self, *, pod_uid: str) -> tuple[str, ...]:
        return tuple(sorted(self.devices.get(pod_uid, ())))


def _pod_marks(pod_uid: str) -> tuple[str, ...]:
    return (f"pod{pod_uid}", f"pod{pod_uid.replace('-', '_')}")


def _in_pod(proc: Path, pid: int, marks: tuple[str, ...]) -> bool:
    try:
        cgroups = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return False  # ended meanwhile, or another PID namespace's
    return any(mark in cgroups for mark in marks)


class EnvironAssignedDevices:
    """The Pod's environment: NVIDIA_VISIBLE_DEVICES of a process in the Pod's cgroup (the agent needs the
    host's PID namespace to see them). Indices are turned into UUIDs by ``uuids_by_index`` (this node's
    discovery); ``all``, ``none``, ``void`` or an index not known read as () (not told)."""

    def __init__(self, *, uuids_by_index: Mapping[int, str], proc: Path = Path("/proc")) -> None:
        self._by_index = dict(uuids_by_index)
        self._proc = proc

    async def assigned(self, *, pod_uid: str) -> tuple[str, ...]:
        return await asyncio.to_thread(self._read, pod_uid)

    def _read(self, pod_uid: str) -> tuple[str, ...]:
        marks = _pod_marks(pod_uid)
        try:
            pids = [int(p.name) for p in self._proc.iterdir() if p.name.isdigit()]
        except OSError:
            return ()
        for pid in sorted(pids):
            if not _in_pod(self._proc, pid, marks):
                continue
            devices = self._visible(pid)
            if devices:
                return devices
        return ()

    def _visible(self, pid: int) -> tuple[str, ...]:
        try:
            raw = (self._proc / str(pid) / "environ").read_bytes()
        except OSError:
            return ()  # ended meanwhile, or not ours to read
        for entry in raw.split(b"\0"):
            name, _, value = entry.partition(b"=")
            if name == b"NVIDIA_VISIBLE_DEVICES":
                return self._uuids(value.decode("utf-8", errors="replace"))
        return ()

    def _uuids(self, value: str) -> tuple[str, ...]:
        items = [v.strip() for v in value.split(",") if v.strip()]
        if not items or any(v in ("all", "none", "void") for v in items):
            return ()
        found: list[str] = []
        for item in items:
            if item.isdigit():
                if int(item) not in self._by_index:
                    return ()
                found.append(self._by_index[int(item)])
            else:
                found.append(item)
        return tuple(sorted(found))


class FirstOf:
    """The first view that tells: e.g. the environment, then NVML."""

    def __init__(self, *views: AssignedDevices) -> None:
        self._views = views

    async def assigned(self, *, pod_uid: str) -> tuple[str, ...]:
        for view in self._views:
            if found := await view.assigned(pod_uid=pod_uid):
                return found
        return ()


class NvmlAssignedDevices:
    """The node's NVML view: devices whose compute processes live in the Pod's cgroup."""

    def __init__(self, *, nvml: ModuleType | None = None, proc: Path = Path("/proc")) -> None:
        self._nvml = nvml
        self._proc = proc
        self._lock = threading.Lock()
        self._ready = False

    async def assigned(self, *, pod_uid: str) -> tuple[str, ...]:
        return await asyncio.to_thread(self._read, pod_uid)

    def _read(self, pod_uid: str) -> tuple[str, ...]:
        nvml = self._init()
        marks = _pod_marks(pod_uid)
        found: set[str] = set()
        for handle in self._devices(nvml):
            pids = _query(nvml, nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
            if any(_in_pod(self._proc, int(p.pid), marks) for p in pids):
                uuid = _query(nvml, nvml.nvmlDeviceGetUUID, handle)
                if uuid is not None:
                    found.add(_text(uuid))
        return tuple(sorted(found))

    def _init(self) -> Any:
        with self._lock:
            if self._nvml is None:
                import pynvml  # only on a host whose agent reads its Pods' devices

                self._nvml = pynvml
            if not self._ready:
                self._nvml.nvmlInit()
                self._ready = True
            return self._nvml

    def _devices(self, nvml: Any) -> list[Any]:
        """Every GPU handle and, on a GPU in MIG mode, its MIG device handles (those hold the processes)."""
        handles: list[Any] = []
        for index in range(int(nvml.nvmlDeviceGetCount())):
            gpu = nvml.nvmlDeviceGetHandleByIndex(index)
            handles.append(gpu)
            mode = _query(nvml, nvml.nvmlDeviceGetMigMode, gpu)
            if not mode or mode[0] != nvml.NVML_DEVICE_MIG_ENABLE:
                continue
            count = _query(nvml, nvml.nvmlDeviceGetMaxMigDeviceCount, gpu) or 0
            for mig in range(int(count)):
                handle = _query(nvml, nvml.nvmlDeviceGetMigDeviceHandleByIndex, gpu, mig)
                if handle is not None:
                    handles.append(handle)
        return handles


def _query(nvml: Any, fn: Any, *args: Any) -> Any | None:
    """One NVML call; None when it fails (not supported, no such MIG slot, a GPU gone)."""
    try:
        return fn(*args)
    except nvml.NVMLError:
        return None


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
