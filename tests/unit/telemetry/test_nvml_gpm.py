"""Tensor-core activity through NVML's GPM, driven by monkeypatched pynvml calls over real ctypes samples."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from services.telemetry.adapters.nvml_probe import NvmlProbe
from services.telemetry.domain.metrics import GpuLost, GpuSample
from tests.unit.telemetry.conftest import T0
from tests.unit.telemetry.test_nvml import FakeDriver, nvml_error, raising


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    return FakeDriver(monkeypatch)


def probe() -> NvmlProbe:
    return NvmlProbe(hostname="gpu-host", clock=lambda: T0)


async def tensor(p: NvmlProbe) -> list[float | None]:
    readings = await p.sample()
    return [r.tensor_active_pct if isinstance(r, GpuSample) else None for r in readings]


async def test_tensor_activity_is_none_until_a_gpu_has_a_previous_gpm_sample(driver: FakeDriver) -> None:
    p = probe()
    assert await tensor(p) == [None, None]  # one sample is no interval yet
    assert await tensor(p) == [42.5, 7.0]  # FakeGpm checks sample1 was the same GPU's previous sample
    driver.gpm.tensor_pct = {0: 0.0, 1: 99.5}
    assert await tensor(p) == [0.0, 99.5]


async def test_two_gpm_samples_per_gpu_are_reused_and_all_freed_at_close(driver: FakeDriver) -> None:
    p = probe()
    for _ in range(5):
        await p.sample()
    assert driver.gpm.allocations == 4  # two per GPU, swapped each tick
    assert driver.gpm.support_calls == 2  # support is asked once per GPU
    await p.close()
    assert driver.gpm.live == {}


@pytest.mark.parametrize(
    "support",
    [
        raising(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND),  # a driver from before GPM
        lambda h: SimpleNamespace(isSupportedDevice=0),  # a board from before Hopper
    ],
    ids=["driver-without-gpm", "board-without-gpm"],
)
async def test_a_gpu_without_gpm_reports_no_tensor_activity_and_is_asked_once(
    driver: FakeDriver, support: Any
) -> None:
    driver.set("nvmlGpmQueryDeviceSupport", support)
    p = probe()
    for _ in range(3):
        readings = await p.sample()
    assert [r.tensor_active_pct for r in readings if isinstance(r, GpuSample)] == [None, None]
    assert all(isinstance(r, GpuSample) and r.sm_util_pct == 87.0 for r in readings)
    assert p.stats.unsupported["gpm_support"] == 2  # once per GPU, not once per tick
    assert driver.gpm.allocations == 0


async def test_a_failed_gpm_read_blanks_that_tick_only_and_is_counted(driver: FakeDriver) -> None:
    p = probe()
    await p.sample()
    driver.set("nvmlGpmSampleGet", raising(pynvml.NVML_ERROR_UNKNOWN))
    assert await tensor(p) == [None, None]
    assert p.stats.errors["gpm_sample"] == 2
    driver.set("nvmlGpmSampleGet", driver.gpm.get)
    assert await tensor(p) == [42.5, 7.0]  # over two ticks: the previous sample was kept
    assert driver.gpm.allocations == 4


async def test_a_metric_the_driver_refuses_is_none_not_zero(driver: FakeDriver) -> None:
    def refused(request: Any) -> Any:
        request.metrics[0].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        request.metrics[0].value = 0.0
        return request

    driver.set("nvmlGpmMetricsGet", refused)
    p = probe()
    await p.sample()
    assert await tensor(p) == [None, None]
    assert p.stats.unsupported["tensor_active"] == 2


async def test_a_gpu_lost_during_its_gpm_read_becomes_a_lost_reading(driver: FakeDriver) -> None:
    p = probe()
    await p.sample()

    def get(handle: Any, sample: Any) -> Any:
        if handle.index == 0:
            raise nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return driver.gpm.get(handle, sample)

    driver.set("nvmlGpmSampleGet", get)
    lost, healthy = await p.sample()
    assert isinstance(lost, GpuLost)
    assert isinstance(healthy, GpuSample)
    assert healthy.tensor_active_pct == 7.0
    await p.close()
    assert driver.gpm.live == {}  # the lost GPU's samples are freed too
