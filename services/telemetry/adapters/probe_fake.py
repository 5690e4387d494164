"""A tiny hand-written GpuProbe with scripted readings, for tests of code that uses a probe."""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime

from services.telemetry.domain.metrics import GpuLost, GpuReading, GpuSample, XidEvent
from services.telemetry.domain.probe import GpuInfo, NodeDiscovery

__all__ = ["FakeProbe"]

_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
_GIB = 1024**3


class FakeProbe:
    """Two fixed GPUs on node 'fake-node'; tests script XIDs and lost GPUs explicitly."""

    def __init__(self, *, hostname: str = "fake-node", gpu_count: int = 2, now: datetime = _EPOCH) -> None:
        self._discovery = NodeDiscovery(
            hostname=hostname,
            driver_version="fake",
            gpus=tuple(
                GpuInfo(uuid=f"GPU-fake-{i}", index=i, model_name="NVIDIA H100", memory_bytes=80 * _GIB)
                for i in range(gpu_count)
            ),
        )
        self.now = now
        self._lost: dict[str, str] = {}
        self._xids: deque[XidEvent] = deque()
        self.closed = False

    def lose_gpu(self, *, gpu_uuid: str, reason: str = "scripted loss") -> None:
        """Make every later sample of this GPU a GpuLost reading."""
        self._lost[gpu_uuid] = reason

    def push_xid(self, *, gpu_uuid: str, xid: int) -> None:
        """Queue an XID event for the next poll_xids()."""
        self._xids.append(
            XidEvent(gpu_uuid=gpu_uuid, node=self._discovery.hostname, xid=xid, timestamp=self.now)
        )

    async def discover(self) -> NodeDiscovery:
        return self._discovery

    async def sample(self) -> list[GpuReading]:
        return [self._reading(gpu) for gpu in self._discovery.gpus]

    async def poll_xids(self) -> list[XidEvent]:
        events = list(self._xids)
        self._xids.clear()
        return events

    async def close(self) -> None:
        self.closed = True

    def _reading(self, gpu: GpuInfo) -> GpuReading:
        node = self._discovery.hostname
        if gpu.uuid in self._lost:
            return GpuLost(
                gpu_uuid=gpu.uuid, node=node, index=gpu.index, timestamp=self.now, reason=self._lost[gpu.uuid]
            )
        return GpuSample(
            gpu_uuid=gpu.uuid,
            node=node,
            index=gpu.index,
            timestamp=self.now,
            sm_util_pct=50.0,
            mem_util_pct=20.0,
            tensor_active_pct=30.0,
            fb_used_bytes=10 * _GIB,
            fb_total_bytes=gpu.memory_bytes,
            pcie_tx_bytes_per_s=1_000_000,
            pcie_rx_bytes_per_s=2_000_000,
            gpu_temp_c=55.0,
            mem_temp_c=None,  # scripted as unsupported, like many PCIe boards
            power_w=300.0,
            power_limit_w=700.0,
            sm_clock_mhz=1755,
            mem_clock_mhz=2619,
            ecc_sbe_total=0,
            ecc_dbe_total=0,
            throttle_reasons=0,
        )
