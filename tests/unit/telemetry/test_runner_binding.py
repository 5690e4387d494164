"""What a process-runner workload sees: its GPUs by UUID, the platform's variables, share limits."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from libs.common.events.scheduler import AllocationItem
from services.telemetry.adapters.runner.binding import Binding, bind, share_fraction

GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
GPU_B = "GPU-bbbbbbbb-0000-0000-0000-000000000000"
MIG = "MIG-cccccccc-0000-0000-0000-000000000000"
RUN = Path("/state/runs/wl-1")
GIB = 1024**3


def _item(
    gpu: str, partition: str | None = None, *, memory: int | None = None, isolated: bool | None = None
) -> AllocationItem:
    return AllocationItem(
        gpu_uuid=gpu,
        partition_id=partition,
        units=Decimal(1),
        model="H100",
        memory_bytes=memory,
        memory_isolated=isolated,
    )


def _bind(*items: AllocationItem, run_env: dict[str, str] | None = None, mps: Path | None = None) -> Binding:
    return bind(
        workload_id="wl-1",
        tenant_id="acme",
        allocations=items,
        card_memory={GPU_A: 80 * GIB, GPU_B: 80 * GIB},
        run_env=run_env or {},
        base_env={"PATH": "/usr/bin", "DATABASE_URL": "postgres://secret", "LANG": "C.UTF-8"},
        run_dir=RUN,
        mps_dir=mps,
    )


def test_whole_gpus_are_visible_by_uuid_in_allocation_order_and_nothing_else() -> None:
    b = _bind(_item(GPU_B), _item(GPU_A))
    assert b.devices == (GPU_B, GPU_A)
    assert b.env["CUDA_VISIBLE_DEVICES"] == f"{GPU_B},{GPU_A}"
    assert b.env["NVIDIA_VISIBLE_DEVICES"] == f"{GPU_B},{GPU_A}"
    assert b.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert b.notes == ()


def test_the_workload_gets_the_platform_variables_and_its_own_but_not_the_agents_secrets() -> None:
    env = _bind(_item(GPU_A), run_env={"EPOCHS": "3", "CUDA_VISIBLE_DEVICES": "all"}).env
    assert env["GPUCLOUD_WORKLOAD_ID"] == "wl-1"
    assert env["GPUCLOUD_TENANT_ID"] == "acme"
    assert env["GPUCLOUD_OUTPUT_DIR"] == str(RUN / "outputs")
    assert env["GPUCLOUD_CHECKPOINT_DIR"] == str(RUN / "checkpoints")
    assert env["EPOCHS"] == "3"
    assert env["CUDA_VISIBLE_DEVICES"] == GPU_A  # the platform's binding wins over the spec's env
    assert (env["PATH"], env["LANG"], env["HOME"]) == ("/usr/bin", "C.UTF-8", str(RUN))
    assert "DATABASE_URL" not in env
    assert "GPUCLOUD_RESTORE_FROM" not in _bind(_item(GPU_A), run_env={"GPUCLOUD_RESTORE_FROM": "/x"}).env


def test_a_mig_instance_is_visible_by_its_own_uuid() -> None:
    b = _bind(_item(GPU_A, MIG, memory=40 * GIB, isolated=True))
    assert b.env["CUDA_VISIBLE_DEVICES"] == MIG
    assert b.notes == ()


def test_a_mig_instance_without_a_device_uuid_says_the_whole_gpu_is_visible() -> None:
    b = _bind(_item(GPU_A, f"{GPU_A}/mig/3g.40gb@4", memory=40 * GIB, isolated=True))
    assert b.env["CUDA_VISIBLE_DEVICES"] == GPU_A
    assert b.notes == (
        f"MIG instance {GPU_A}/mig/3g.40gb@4 has no MIG device UUID on this host: all of {GPU_A} is visible",
    )


def test_a_time_sliced_share_without_mps_is_told_its_memory_is_not_isolated() -> None:
    b = _bind(_item(GPU_A, "share:1", memory=20 * GIB, isolated=False))
    assert b.env["CUDA_VISIBLE_DEVICES"] == GPU_A
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in b.env
    assert b.notes == ("memory not isolated: a time-sliced share without an MPS control daemon on this host",)


def test_a_time_sliced_share_with_an_mps_daemon_gets_its_thread_and_memory_limits() -> None:
    b = _bind(_item(GPU_A, "share:1", memory=20 * GIB, isolated=False), mps=Path("/run/nvidia-mps"))
    assert b.env["CUDA_MPS_PIPE_DIRECTORY"] == "/run/nvidia-mps"
    assert b.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert b.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
    assert b.notes == ()


def test_a_shares_part_comes_from_its_memory_or_else_from_inventorys_share_id() -> None:
    assert (
        share_fraction(_item(GPU_A, "share:0", memory=20 * GIB, isolated=False), card_bytes=80 * GIB) == 0.25
    )
    assert share_fraction(_item(GPU_A, f"{GPU_A}/ts/1-of-3", isolated=False), card_bytes=None) == 1 / 3
    assert share_fraction(_item(GPU_A), card_bytes=80 * GIB) is None
    assert share_fraction(_item(GPU_A, MIG, memory=40 * GIB, isolated=True), card_bytes=80 * GIB) is None
