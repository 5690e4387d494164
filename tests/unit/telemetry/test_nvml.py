"""NvmlProbe's error mapping, driven by pynvml's real exception classes through monkeypatched calls."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from services.telemetry.adapters import nvml_check
from services.telemetry.adapters.nvml_probe import NvmlProbe, NvmlUnavailable
from services.telemetry.domain.metrics import GpuLost, GpuSample
from tests.unit.telemetry.conftest import T0

GIB = 1024**3


def nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # returns the matching subclass, e.g. NVMLError_NotSupported


def raising(code: int) -> Any:
    def call(*_args: Any) -> Any:
        raise nvml_error(code)

    return call


def address(pointer: Any) -> int:
    return int(ctypes.cast(pointer, ctypes.c_void_p).value or 0)


class FakeGpm:
    """NVML's GPM over real ctypes sample pointers: it records which GPU and tick filled each sample and
    answers a metrics request with the GPU's scripted tensor activity, after checking the request."""

    def __init__(self) -> None:
        self.tensor_pct = {0: 42.5, 1: 7.0}  # by GPU index
        self.live: dict[int, Any] = {}  # address -> allocated sample (kept alive until freed)
        self.filled: dict[int, tuple[int, int]] = {}  # address -> (GPU index, that GPU's tick)
        self.ticks: dict[int, int] = {}
        self.support_calls = 0
        self.allocations = 0

    def support(self, handle: Any) -> Any:
        self.support_calls += 1
        return SimpleNamespace(version=pynvml.NVML_GPM_SUPPORT_VERSION, isSupportedDevice=1)

    def alloc(self) -> Any:
        sample = ctypes.pointer(pynvml.struct_c_nvmlGpmSample_t())
        self.live[address(sample)] = sample
        self.allocations += 1
        return sample

    def get(self, handle: Any, sample: Any) -> Any:
        assert address(sample) in self.live, "sampled into a freed or foreign sample"
        self.ticks[handle.index] = tick = self.ticks.get(handle.index, 0) + 1
        self.filled[address(sample)] = (handle.index, tick)
        return sample

    def metrics(self, request: Any) -> Any:
        assert (request.version, request.numMetrics) == (pynvml.NVML_GPM_METRICS_GET_VERSION, 1)
        assert request.metrics[0].metricId == pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL
        gpu, before = self.filled[address(request.sample1)]
        same_gpu, after = self.filled[address(request.sample2)]
        assert (same_gpu, after) == (gpu, before + 1), "sample1 must be the GPU's previous sample"
        request.metrics[0].nvmlReturn = pynvml.NVML_SUCCESS
        request.metrics[0].value = self.tensor_pct[gpu]
        return request

    def free(self, sample: Any) -> None:
        del self.live[address(sample)]


class FakeDriver:
    """Two GPUs behind monkeypatched pynvml functions; tests override single calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.handles = [SimpleNamespace(index=0), SimpleNamespace(index=1)]
        self.init_calls = 0
        self.events: list[Any] = []
        self.patch = monkeypatch
        self.gpm = FakeGpm()
        calls: dict[str, Any] = {
            "nvmlInit": self._init,
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: 2,
            "nvmlDeviceGetHandleByIndex": lambda i: self.handles[i],
            "nvmlDeviceGetUUID": lambda h: f"GPU-{h.index}",
            "nvmlDeviceGetName": lambda h: b"NVIDIA H200",
            "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(total=141 * GIB, used=10 * GIB),
            "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(
                busId=f"00000000:{h.index + 0x18:02X}:00.0".encode()
            ),
            "nvmlDeviceGetMigMode": raising(pynvml.NVML_ERROR_NOT_SUPPORTED),
            "nvmlDeviceGetNvLinkState": raising(pynvml.NVML_ERROR_INVALID_ARGUMENT),
            "nvmlSystemGetDriverVersion": lambda: "550.54",
            "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=87, memory=40),
            "nvmlDeviceGetPcieThroughput": lambda h, counter: 1000,
            "nvmlDeviceGetTemperature": lambda h, sensor: 61,
            "nvmlDeviceGetFieldValues": raising(pynvml.NVML_ERROR_NOT_SUPPORTED),
            "nvmlDeviceGetPowerUsage": lambda h: 512_345,
            "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
            "nvmlDeviceGetClockInfo": lambda h, clock: 1980 if clock == pynvml.NVML_CLOCK_SM else 3201,
            "nvmlDeviceGetTotalEccErrors": raising(pynvml.NVML_ERROR_NOT_SUPPORTED),
            "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x4,
            "nvmlEventSetCreate": lambda: "event-set",
            "nvmlDeviceRegisterEvents": lambda h, types, es: None,
            "nvmlEventSetWait_v2": self._wait,
            "nvmlEventSetFree": lambda es: None,
            "nvmlGpmQueryDeviceSupport": self.gpm.support,
            "nvmlGpmSampleAlloc": self.gpm.alloc,
            "nvmlGpmSampleGet": self.gpm.get,
            "nvmlGpmMetricsGet": self.gpm.metrics,
            "nvmlGpmSampleFree": self.gpm.free,
        }
        for name, fn in calls.items():
            monkeypatch.setattr(pynvml, name, fn)

    def set(self, name: str, fn: Any) -> None:
        self.patch.setattr(pynvml, name, fn)

    def _init(self) -> None:
        self.init_calls += 1

    def _wait(self, _event_set: Any, _timeout_ms: int) -> Any:
        if not self.events:
            raise nvml_error(pynvml.NVML_ERROR_TIMEOUT)
        return self.events.pop(0)


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    return FakeDriver(monkeypatch)


def probe() -> NvmlProbe:
    return NvmlProbe(hostname="gpu-host", clock=lambda: T0)


def test_pynvml_builds_the_specific_exception_subclasses() -> None:
    assert isinstance(nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED), pynvml.NVMLError_NotSupported)
    assert isinstance(nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST), pynvml.NVMLError_GpuIsLost)
    assert isinstance(nvml_error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), pynvml.NVMLError_LibraryNotFound)


async def test_nvml_is_initialised_lazily_and_once(driver: FakeDriver) -> None:
    p = probe()
    assert driver.init_calls == 0
    await p.discover()
    await p.sample()
    assert driver.init_calls == 1


async def test_discovery_reports_gpus_bus_ids_and_no_mig_where_unsupported(driver: FakeDriver) -> None:
    node = await probe().discover()
    assert node.hostname == "gpu-host"
    assert node.driver_version == "550.54"
    assert [(g.uuid, g.model_name, g.pci_bus_id) for g in node.gpus] == [
        ("GPU-0", "NVIDIA H200", "00000000:18:00.0"),
        ("GPU-1", "NVIDIA H200", "00000000:19:00.0"),
    ]
    assert all(g.mig_enabled is None and g.nvlink_peers == () for g in node.gpus)


async def test_not_supported_fields_become_none_and_nvml_units_are_converted(driver: FakeDriver) -> None:
    p = probe()
    sample = (await p.sample())[0]
    assert isinstance(sample, GpuSample)
    assert (sample.ecc_sbe_total, sample.ecc_dbe_total, sample.mem_temp_c) == (None, None, None)
    assert sample.power_w == pytest.approx(512.345)
    assert sample.power_limit_w == 700.0
    assert sample.pcie_rx_bytes_per_s == 1000 * 1024
    assert sample.throttle_names == ("sw_power_cap",)
    assert p.stats.unsupported["ecc_sbe"] == 2  # once per GPU


async def test_a_lost_gpu_becomes_a_lost_reading_and_stays_lost(driver: FakeDriver) -> None:
    p = probe()
    await p.discover()

    def utilisation(handle: Any) -> Any:
        if handle.index == 0:
            raise nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return SimpleNamespace(gpu=10, memory=5)

    driver.set("nvmlDeviceGetUtilizationRates", utilisation)
    lost, healthy = await p.sample()
    assert isinstance(lost, GpuLost)
    assert lost.gpu_uuid == "GPU-0"
    assert "lost" in lost.reason.lower()
    assert isinstance(healthy, GpuSample)
    driver.set("nvmlDeviceGetUtilizationRates", lambda h: SimpleNamespace(gpu=1, memory=1))
    assert isinstance((await p.sample())[0], GpuLost)


async def test_other_nvml_errors_blank_the_field_and_are_counted(driver: FakeDriver) -> None:
    driver.set("nvmlDeviceGetTemperature", raising(pynvml.NVML_ERROR_UNKNOWN))
    p = probe()
    sample = (await p.sample())[1]
    assert isinstance(sample, GpuSample)
    assert sample.gpu_temp_c is None
    assert p.stats.errors["gpu_temp"] == 2


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED])
async def test_a_host_without_a_usable_driver_raises_nvml_unavailable(driver: FakeDriver, code: int) -> None:
    driver.set("nvmlInit", raising(code))
    with pytest.raises(NvmlUnavailable, match="NVML is not usable"):
        await probe().discover()


async def test_xid_events_are_read_from_the_event_set_and_mapped_to_uuids(driver: FakeDriver) -> None:
    p = probe()
    await p.discover()
    driver.events = [
        SimpleNamespace(
            device=driver.handles[1], eventData=79, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF
        ),
        SimpleNamespace(device=driver.handles[0], eventData=13, gpuInstanceId=1, computeInstanceId=0),
    ]
    events = await p.poll_xids()
    assert [(e.gpu_uuid, e.xid, e.gpu_instance_id) for e in events] == [("GPU-1", 79, None), ("GPU-0", 13, 1)]
    assert await p.poll_xids() == []


async def test_gpus_that_refuse_xid_events_still_sample(driver: FakeDriver) -> None:
    driver.set("nvmlDeviceRegisterEvents", raising(pynvml.NVML_ERROR_NOT_SUPPORTED))
    p = probe()
    assert await p.poll_xids() == []
    assert p.stats.unsupported["xid_events"] == 2
    assert all(isinstance(r, GpuSample) for r in await p.sample())


def test_nvml_check_exits_non_zero_with_one_line_without_a_driver(
    driver: FakeDriver, capsys: pytest.CaptureFixture[str]
) -> None:
    driver.set("nvmlInit", raising(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    assert nvml_check.main(["--seconds", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no usable NVIDIA GPU" in err


def test_nvml_check_prints_discovery_samples_and_a_summary(
    driver: FakeDriver, capsys: pytest.CaptureFixture[str]
) -> None:
    assert nvml_check.main(["--seconds", "0.05", "--interval", "0.01"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('{"type": "discovery"')
    assert '"type": "sample"' in lines[1]
    assert '"type": "summary"' in lines[-1]
    assert '"ecc_sbe_total"' in lines[-1]  # listed among unsupported fields
