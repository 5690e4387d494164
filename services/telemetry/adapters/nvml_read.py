"""Synchronous NVML readers behind NvmlProbe: every pynvml call and its error mapping lives here.

The mapping (after nvitop's libnvml): "not supported" / "function not found" → None; "GPU is lost" →
GpuLostError, which the probe turns into a GpuLost reading; any other NVML error → None and counted.
"""

from __future__ import annotations

import ctypes
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pynvml

from services.telemetry.domain.metrics import GpuSample, MigSample
from services.telemetry.domain.probe import GpuInfo, MigInstanceInfo

__all__ = ["GpuLostError", "NvmlStats", "Reader", "handle_key", "text", "xid_instance"]

_NO_ID = 0xFFFFFFFF  # NVML's "not a MIG instance" marker
_QUIET = (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound)


class GpuLostError(Exception):
    """NVML says the GPU is lost: it fell off the bus and needs a reset."""


@dataclass(slots=True)
class NvmlStats:
    """What the reader could not read, by field, for the nvml_check summary and logs."""

    unsupported: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)


def text(value: Any) -> str:
    """NVML strings arrive as bytes from older pynvml releases and str from newer ones."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


class Reader:
    """Calls pynvml and maps its errors; holds no NVML state besides the stats."""

    def __init__(self) -> None:
        self.stats = NvmlStats()

    def query(self, name: str, fn: Callable[..., Any], *args: Any) -> Any | None:
        """Call one NVML function: None when unsupported or failing, GpuLostError when the GPU is lost."""
        try:
            return fn(*args)
        except pynvml.NVMLError_GpuIsLost as exc:
            raise GpuLostError(str(exc)) from exc
        except _QUIET:
            self.stats.unsupported[name] += 1
        except pynvml.NVMLError:
            self.stats.errors[name] += 1
        return None

    def gpu_info(self, *, handle: Any, index: int) -> GpuInfo:
        """Discovery facts for one GPU handle."""
        mem = self.query("memory", pynvml.nvmlDeviceGetMemoryInfo, handle)
        pci = self.query("pci", pynvml.nvmlDeviceGetPciInfo, handle)
        mig_mode = self.query("mig_mode", pynvml.nvmlDeviceGetMigMode, handle)
        mig_enabled = None if mig_mode is None else mig_mode[0] == pynvml.NVML_DEVICE_MIG_ENABLE
        uuid = self.query("uuid", pynvml.nvmlDeviceGetUUID, handle)
        if uuid is None:
            raise GpuLostError("GPU answers without a UUID")
        return GpuInfo(
            uuid=text(uuid),
            index=index,
            model_name=text(self.query("name", pynvml.nvmlDeviceGetName, handle) or "unknown"),
            memory_bytes=None if mem is None else int(mem.total),
            pci_bus_id=None if pci is None else text(pci.busId),
            nvlink_peers=self._nvlink_peers(handle),
            mig_enabled=mig_enabled,
            mig_instances=tuple(self._mig_instances(handle)) if mig_enabled else (),
        )

    def _nvlink_peers(self, handle: Any) -> tuple[str, ...]:
        peers: list[str] = []
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                if pynvml.nvmlDeviceGetNvLinkState(handle, link) != pynvml.NVML_FEATURE_ENABLED:
                    continue
                peers.append(text(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
            except pynvml.NVMLError_GpuIsLost as exc:
                raise GpuLostError(str(exc)) from exc
            except pynvml.NVMLError:
                # Links past the board's count answer "invalid argument"/"not supported": no NVLink there.
                continue
        return tuple(peers)

    def _mig_instances(self, handle: Any) -> list[MigInstanceInfo]:
        count = self.query("mig_count", pynvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
        out: list[MigInstanceInfo] = []
        for i in range(int(count)):
            mig = self.query("mig_handle", pynvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
            if mig is None:
                continue  # slot not populated
            mem = self.query("mig_memory", pynvml.nvmlDeviceGetMemoryInfo, mig)
            out.append(
                MigInstanceInfo(
                    mig_uuid=text(pynvml.nvmlDeviceGetUUID(mig)),
                    gpu_instance_id=int(pynvml.nvmlDeviceGetGpuInstanceId(mig)),
                    compute_instance_id=self.query("mig_ci", pynvml.nvmlDeviceGetComputeInstanceId, mig),
                    memory_bytes=None if mem is None else int(mem.total),
                )
            )
        return out

    def sample(
        self,
        *,
        handle: Any,
        info: GpuInfo,
        node: str,
        now: datetime,
        mig_handles: list[Any],
        tensor_active_pct: float | None = None,
    ) -> GpuSample:
        """Read the core metrics of one GPU (NVML units converted to ours).

        Tensor activity is read by nvml_gpm, which keeps the GPM samples between reads, and passed in.
        """
        q = self.query
        util = q("utilization", pynvml.nvmlDeviceGetUtilizationRates, handle)
        mem = q("memory", pynvml.nvmlDeviceGetMemoryInfo, handle)
        tx_kb = q("pcie_tx", pynvml.nvmlDeviceGetPcieThroughput, handle, pynvml.NVML_PCIE_UTIL_TX_BYTES)
        rx_kb = q("pcie_rx", pynvml.nvmlDeviceGetPcieThroughput, handle, pynvml.NVML_PCIE_UTIL_RX_BYTES)
        power_mw = q("power", pynvml.nvmlDeviceGetPowerUsage, handle)
        limit_mw = q("power_limit", pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
        return GpuSample(
            gpu_uuid=info.uuid,
            node=node,
            index=info.index,
            timestamp=now,
            sm_util_pct=None if util is None else float(util.gpu),
            mem_util_pct=None if util is None else float(util.memory),
            tensor_active_pct=tensor_active_pct,
            fb_used_bytes=None if mem is None else int(mem.used),
            fb_total_bytes=None if mem is None else int(mem.total),
            pcie_tx_bytes_per_s=None if tx_kb is None else int(tx_kb) * 1024,  # NVML reports KB/s
            pcie_rx_bytes_per_s=None if rx_kb is None else int(rx_kb) * 1024,
            gpu_temp_c=_opt_float(
                q("gpu_temp", pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU)
            ),
            mem_temp_c=self._memory_temp(handle),
            power_w=None if power_mw is None else power_mw / 1000.0,  # NVML reports mW
            power_limit_w=None if limit_mw is None else limit_mw / 1000.0,
            sm_clock_mhz=_opt_int(q("sm_clock", pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM)),
            mem_clock_mhz=_opt_int(
                q("mem_clock", pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_MEM)
            ),
            ecc_sbe_total=self._ecc(handle, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, "ecc_sbe"),
            ecc_dbe_total=self._ecc(handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "ecc_dbe"),
            throttle_reasons=_opt_int(q("throttle", _throttle_fn(), handle)),
            mig=tuple(
                self._mig_sample(m, info=mi) for m, mi in zip(mig_handles, info.mig_instances, strict=False)
            ),
        )

    def _ecc(self, handle: Any, error_type: int, name: str) -> int | None:
        return _opt_int(
            self.query(name, pynvml.nvmlDeviceGetTotalEccErrors, handle, error_type, pynvml.NVML_VOLATILE_ECC)
        )

    def _memory_temp(self, handle: Any) -> float | None:
        values = self.query(
            "mem_temp", pynvml.nvmlDeviceGetFieldValues, handle, [pynvml.NVML_FI_DEV_MEMORY_TEMP]
        )
        if values is None or values[0].nvmlReturn != pynvml.NVML_SUCCESS:
            self.stats.unsupported["mem_temp"] += values is not None
            return None
        value = int(values[0].value.uiVal)
        return float(value) if value > 0 else None  # boards without an HBM sensor report 0

    def _mig_sample(self, mig: Any, *, info: MigInstanceInfo) -> MigSample:
        mem = self.query("mig_memory", pynvml.nvmlDeviceGetMemoryInfo, mig)
        return MigSample(
            mig_uuid=info.mig_uuid,
            gpu_instance_id=info.gpu_instance_id,
            compute_instance_id=info.compute_instance_id,
            fb_used_bytes=None if mem is None else int(mem.used),
            fb_total_bytes=None if mem is None else int(mem.total),
        )


def _throttle_fn() -> Callable[..., Any]:
    # Drivers >= 535 renamed throttle reasons to "clock event reasons"; older pynvml lacks the new name.
    fn: Callable[..., Any] | None = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return fn or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def handle_key(handle: Any) -> int:
    """A hashable identity for an NVML device handle (the event API hands back a fresh pointer object)."""
    try:
        return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)
    except (TypeError, ctypes.ArgumentError):
        return id(handle)  # not a ctypes pointer, e.g. a test double


def xid_instance(value: int) -> int | None:
    """NVML marks 'no MIG instance' with 0xFFFFFFFF."""
    return None if value == _NO_ID else int(value)
