"""The rolling telemetry window per GPU, in Redis: what diagnosis correlates with a fault.

Samples arrive once per node per second, far more often than anything else, so they bypass the
transactional consumer (no inbox row, no Postgres write): a lost or repeated sample only thins or
thickens the evidence, and the window rebuilds itself from the live stream within ``window_s``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from redis.asyncio import Redis

from libs.common.events.sample_wire import WireBatch
from libs.common.redis import Keyspace
from services.recovery.domain.correlate import TelemetrySample
from services.recovery.domain.health import GpuReading
from services.recovery.domain.window_samples import to_readings, to_samples

__all__ = ["WINDOW_FIELDS", "SampleWindow", "window_entry"]

#: The GpuMetrics fields a window record is made of.
WINDOW_FIELDS = (
    "sm_util_pct",
    "fb_used_bytes",
    "fb_total_bytes",
    "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s",
    "gpu_temp_c",
    "power_w",
    "power_limit_w",
    "throttle_reasons",
    "xid_count",
)


def window_entry(sample: Mapping[str, Any], *, at: datetime) -> dict[str, Any]:
    """The compact record the rolling window keeps for one GPU and one second.

    ``sample`` holds GpuMetrics fields with their JSON types as the models would accept them unchanged
    (a float field may be a JSON int): float fields are written as floats, as the models made them.
    """
    get = sample.get
    if get("lost_reason"):
        # The agent could not read the GPU (fallen off the bus): no metrics, only that it was lost then.
        return {"at": at.isoformat(), "lost": 1, "xid": get("xid_count") or 0}
    used, total = get("fb_used_bytes"), get("fb_total_bytes")
    fb = 100.0 * used / total if used is not None and total else 0.0
    return {
        "at": at.isoformat(),
        "sm": float(get("sm_util_pct") or 0.0),
        "fb": min(max(fb, 0.0), 100.0),
        "tx": float(get("pcie_tx_bytes_per_s") or 0.0),
        "rx": float(get("pcie_rx_bytes_per_s") or 0.0),
        "t": float(get("gpu_temp_c") or 0.0),
        "p": float(get("power_w") or 0.0),
        "pl": float(get("power_limit_w") or 0.0),
        "thr": get("throttle_reasons") or 0,
        "xid": get("xid_count") or 0,
    }


class SampleWindow:
    """Last ``window_s`` samples of every GPU (one list per GPU) and the GPUs seen on each node."""

    def __init__(self, *, redis: Callable[[], Redis], keys: Keyspace, window_s: int) -> None:
        # A provider: the runtime opens its Redis client only when the service starts.
        self._client = redis
        self._keys = keys
        self._window_s = window_s

    def _gpu_key(self, gpu: str) -> str:
        return self._keys.key("window", gpu)

    def _node_key(self, node: str) -> str:
        return self._keys.key("node-gpus", node)

    async def add(self, batches: Sequence[WireBatch]) -> None:
        """Append nodes' ticks (a poll's) to their GPUs' windows, in order, in one round trip."""
        if not batches:
            return
        ttl = self._window_s * 2
        pipe = self._client().pipeline(transaction=False)
        for batch in batches:
            for sample in batch.samples:
                key = self._gpu_key(sample["gpu"])
                pipe.lpush(key, json.dumps(window_entry(sample, at=batch.at)))
                pipe.ltrim(key, 0, self._window_s - 1)
                pipe.expire(key, ttl)
            if batch.samples:
                pipe.sadd(self._node_key(batch.node), *[s["gpu"] for s in batch.samples])
                pipe.expire(self._node_key(batch.node), ttl)
        await pipe.execute()

    async def samples(self, gpu: str, *, until: datetime) -> list[TelemetrySample]:
        """The GPU's window up to ``until``, oldest first."""
        return (await self._read([gpu], until=until))[0]

    async def peers(self, node: str, *, exclude: str | None, until: datetime) -> list[TelemetrySample]:
        """The windows of the node's other GPUs, flattened."""
        gpus = [gpu for gpu in await self.node_gpus(node) if gpu != exclude]
        return [s for window in await self._read(gpus, until=until) for s in window]

    async def node_gpus(self, node: str) -> list[str]:
        """The GPUs the node's agent reported within the window, by id."""
        members = await self._client().smembers(self._node_key(node))
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    async def readings(self, gpus: Sequence[str]) -> dict[str, list[GpuReading]]:
        """Every reading of each GPU in the window (answering or lost), oldest first."""
        entries = await self._entries(gpus)
        return {gpu: to_readings(gpu, items) for gpu, items in zip(gpus, entries, strict=True)}

    async def _read(self, gpus: Sequence[str], *, until: datetime) -> list[list[TelemetrySample]]:
        entries = await self._entries(gpus)
        return [to_samples(gpu, items, until=until) for gpu, items in zip(gpus, entries, strict=True)]

    async def _entries(self, gpus: Sequence[str]) -> list[list[dict[str, Any]]]:
        if not gpus:
            return []
        pipe = self._client().pipeline(transaction=False)
        for gpu in gpus:
            pipe.lrange(self._gpu_key(gpu), 0, -1)
        raw = await pipe.execute()
        return [[json.loads(item) for item in items] for items in raw]
