"""One contract for the assigned-device read-back: the NVML view (over a fake NVML module and a temp
/proc tree) and the fake answer alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from services.telemetry.adapters.runner.kube_devices import (
    AssignedDevices,
    EnvironAssignedDevices,
    FakeAssignedDevices,
    FirstOf,
    NvmlAssignedDevices,
)

POD = "6f1c2d3e-aaaa-bbbb-cccc-000000000001"
OTHER = "6f1c2d3e-aaaa-bbbb-cccc-000000000002"


class _Error(Exception):
    pass


def _nvml(processes: dict[str, list[int]], mig: dict[str, list[str]]) -> Any:
    """GPUs by UUID with their compute processes; a GPU in ``mig`` holds MIG devices instead."""
    gpus = list(processes.keys() - {m for ms in mig.values() for m in ms})

    def mig_handle(gpu: str, index: int) -> str:
        if index >= len(mig.get(gpu, [])):
            raise _Error("no MIG device there")
        return mig[gpu][index]

    return SimpleNamespace(
        NVMLError=_Error,
        NVML_DEVICE_MIG_ENABLE=1,
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: sorted(gpus)[i],
        nvmlDeviceGetMigMode=lambda h: (1 if h in mig else 0, 0),
        nvmlDeviceGetMaxMigDeviceCount=lambda h: 7,
        nvmlDeviceGetMigDeviceHandleByIndex=mig_handle,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=p) for p in processes.get(h, [])],
        nvmlDeviceGetUUID=lambda h: h.encode(),
    )


def _proc(root: Path, pids: dict[int, str]) -> Path:
    for pid, cgroup in pids.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "cgroup").write_text(cgroup)
    return root


def nvml_view(tmp_path: Path) -> AssignedDevices:
    processes = {"GPU-A": [10], "GPU-B": [20], "GPU-C": [], "MIG-C1": [30], "MIG-C2": [99]}
    proc = _proc(
        tmp_path,
        {
            10: f"0::/kubepods/besteffort/pod{POD}/abc\n",
            20: f"0::/kubepods/besteffort/pod{OTHER}/def\n",
            30: f"0::/kubepods.slice/kubepods-pod{POD.replace('-', '_')}.slice/cri-x.scope\n",
        },
    )  # pid 99 has ended: no /proc entry
    return NvmlAssignedDevices(nvml=_nvml(processes, {"GPU-C": ["MIG-C1", "MIG-C2"]}), proc=proc)


def fake(tmp_path: Path) -> AssignedDevices:
    return FakeAssignedDevices({POD: ("MIG-C1", "GPU-A"), OTHER: ("GPU-B",)})


@pytest.mark.parametrize("make", [nvml_view, fake], ids=["nvml", "fake"])
async def test_a_pod_reads_as_the_devices_its_processes_use(
    make: Callable[[Path], AssignedDevices], tmp_path: Path
) -> None:
    devices = make(tmp_path)
    assert await devices.assigned(pod_uid=POD) == ("GPU-A", "MIG-C1")
    assert await devices.assigned(pod_uid=OTHER) == ("GPU-B",)
    assert await devices.assigned(pod_uid="no-such-pod") == ()


def _environ(root: Path, pid: int, cgroup: str, env: dict[str, str]) -> None:
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "cgroup").write_text(cgroup)
    (root / str(pid) / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")


def environ_view(tmp_path: Path) -> AssignedDevices:
    """NVIDIA's device plugin gave the Pod's container NVIDIA_VISIBLE_DEVICES (UUIDs; indices for OTHER)."""
    _environ(tmp_path, 10, f"0::/kubepods/besteffort/pod{POD}/abc\n", {"PATH": "/bin"})  # the pause process
    _environ(
        tmp_path,
        11,
        f"0::/kubepods/besteffort/pod{POD}/abc\n",
        {"NVIDIA_VISIBLE_DEVICES": "MIG-C1,GPU-A", "HOME": "/root"},
    )
    _environ(
        tmp_path,
        20,
        f"0::/kubepods.slice/kubepods-pod{OTHER.replace('-', '_')}.slice/cri-x.scope\n",
        {"NVIDIA_VISIBLE_DEVICES": "1"},
    )
    return EnvironAssignedDevices(uuids_by_index={0: "GPU-A", 1: "GPU-B"}, proc=tmp_path)


def environ_then_nvml(tmp_path: Path) -> AssignedDevices:
    """The environment tells nothing here (no process of either Pod has it), so NVML's view answers."""
    return FirstOf(EnvironAssignedDevices(uuids_by_index={}, proc=tmp_path / "empty"), nvml_view(tmp_path))


@pytest.mark.parametrize("make", [environ_view, environ_then_nvml], ids=["environ", "environ-then-nvml"])
async def test_the_environment_view_and_the_fallback_keep_the_same_contract(
    make: Callable[[Path], AssignedDevices], tmp_path: Path
) -> None:
    devices = make(tmp_path)
    assert await devices.assigned(pod_uid=POD) == ("GPU-A", "MIG-C1")
    assert await devices.assigned(pod_uid=OTHER) == ("GPU-B",)
    assert await devices.assigned(pod_uid="no-such-pod") == ()


@pytest.mark.parametrize("value", ["all", "none", "void", "", "7"])
async def test_a_visible_devices_value_that_names_no_device_of_this_node_tells_nothing(
    value: str, tmp_path: Path
) -> None:
    _environ(tmp_path, 5, f"0::/kubepods/pod{POD}/x\n", {"NVIDIA_VISIBLE_DEVICES": value})
    assert (
        await EnvironAssignedDevices(uuids_by_index={0: "GPU-A"}, proc=tmp_path).assigned(pod_uid=POD) == ()
    )
