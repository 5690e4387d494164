"""Tensor-core activity through NVML's GPU Performance Monitoring (GPM) API, Hopper and later.

GPM metrics are rates between two samples, so each GPU keeps the sample of its previous read: the first
read of a GPU gives None, every later one the activity since the read before. Two samples are allocated
per GPU and swapped, never one a tick. A GPU without GPM (older boards, older drivers, MIG mode on some)
gives None, asked once; any other NVML error gives None for that read and is counted by the Reader.
MIG instances (nvmlGpmMigSampleGet) are not read: their samples carry no tensor activity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml

from services.telemetry.adapters.nvml_read import GpuLostError, NvmlStats, handle_key

__all__ = ["GpmTensorActivity"]

Query = Callable[..., Any]


class GpmTensorActivity:
    """NVML_GPM_METRIC_ANY_TENSOR_UTIL per GPU handle, from its previous GPM sample to the current one."""

    def __init__(self, *, query: Query, stats: NvmlStats) -> None:
        self._query = query  # Reader.query: None when unsupported or failing, GpuLostError when lost
        self._stats = stats
        self._supported: dict[int, bool] = {}
        self._previous: dict[int, Any] = {}
        self._spare: dict[int, Any] = {}  # allocated, to be filled by the next read

    def read(self, handle: Any) -> float | None:
        """Percent of the time since this GPU's previous read that any tensor pipe was active."""
        key = handle_key(handle)
        if not self._supports(handle, key):
            return None
        current = self._spare.get(key)
        if current is None:
            current = self._query("gpm_sample_alloc", pynvml.nvmlGpmSampleAlloc)
            if current is None:
                return None
        self._spare[key] = current  # every allocated sample sits in a dict, whatever is raised next
        if self._query("gpm_sample", pynvml.nvmlGpmSampleGet, handle, current) is None:
            return None
        previous = self._previous.get(key)
        self._previous[key] = current
        if previous is None:
            del self._spare[key]
            return None
        self._spare[key] = previous
        return self._tensor_util(previous, current)

    def close(self) -> None:
        """Free every GPM sample (before nvmlShutdown), and forget which GPUs have GPM (handles are
        the driver's session's: the next initialisation asks again)."""
        samples = [*self._previous.values(), *self._spare.values()]
        self._previous, self._spare, self._supported = {}, {}, {}
        for sample in samples:
            try:
                self._query("gpm_sample_free", pynvml.nvmlGpmSampleFree, sample)
            except GpuLostError:
                continue  # a lost GPU's samples are freed with the library at shutdown

    def _supports(self, handle: Any, key: int) -> bool:
        supported = self._supported.get(key)
        if supported is None:
            support = self._query("gpm_support", pynvml.nvmlGpmQueryDeviceSupport, handle)
            supported = support is not None and bool(support.isSupportedDevice)
            if support is not None and not supported:
                self._stats.unsupported["gpm_support"] += 1  # the driver has GPM, this board does not
            self._supported[key] = supported
        return supported

    def _tensor_util(self, previous: Any, current: Any) -> float | None:
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 1
        request.sample1, request.sample2 = previous, current
        request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL
        answer = self._query("gpm_metrics", pynvml.nvmlGpmMetricsGet, request)
        if answer is None:
            return None
        metric = answer.metrics[0]
        if metric.nvmlReturn != pynvml.NVML_SUCCESS:
            self._stats.unsupported["tensor_active"] += 1
            return None
        return min(max(float(metric.value), 0.0), 100.0)
