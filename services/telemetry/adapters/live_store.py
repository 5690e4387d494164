"""Live state in Redis: the latest sample of every GPU, the GPUs of every node, recent samples.

Keys (under the runtime's keyspace): ``latest`` hash gpu -> JSON sample (with node and at),
``node:<hostname>`` set of its GPUs, ``nodes`` set, ``recent:<gpu>`` list (newest first) kept only
for allocated GPUs, which is all the hints need. All of it is rebuilt by replaying telemetry.samples.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from libs.common.redis import Keyspace

__all__ = ["MEMBERSHIP_REFRESH_S", "LiveState"]

MEMBERSHIP_REFRESH_S = 5.0


class LiveState:
    """Reads and writes the live keys."""

    def __init__(self, *, redis: Redis, keys: Keyspace, recent: int) -> None:
        self._redis = redis
        self._keys = keys
        self._recent = recent
        self.latest_key = keys.key("latest")
        self._members: dict[str, tuple[float, frozenset[str]]] = {}  # node -> (refresh at, GPUs written)

    def write_poll(
        self,
        pipe: Pipeline,
        *,
        entries: Mapping[str, bytes],
        members: Mapping[str, Iterable[str]],
        recent: Iterable[tuple[str, bytes]],
    ) -> None:
        """Queue one poll's writes on a pipeline: latest values (one HSET for every node), node
        membership, and the recent lists of allocated GPUs (every sample, in order).

        Membership changes rarely, so a node's set is re-added only when it shows a GPU not written
        yet, and otherwise every MEMBERSHIP_REFRESH_S (which also rebuilds it after Redis lost it).
        """
        if entries:
            mapping: dict[Any, Any] = dict(entries)
            pipe.hset(self.latest_key, mapping=mapping)
        now = time.monotonic()
        new_nodes: list[str] = []
        for node, gpus in members.items():
            known = self._members.get(node)
            if known is None or now >= known[0] or not known[1].issuperset(gpus):
                gpu_set = set(gpus) | (known[1] if known is not None and now < known[0] else set())
                self._members[node] = (now + MEMBERSHIP_REFRESH_S, frozenset(gpu_set))
                pipe.sadd(self._keys.key("node", node), *gpu_set)
                new_nodes.append(node)
        if new_nodes:
            pipe.sadd(self._keys.key("nodes"), *new_nodes)
        for gpu, value in recent:
            key = self._keys.key("recent", gpu)
            pipe.lpush(key, value)
            pipe.ltrim(key, 0, self._recent - 1)

    async def all(self) -> list[dict[str, Any]]:
        """Every GPU's latest sample."""
        raw = await self._redis.hgetall(self.latest_key)
        return [json.loads(v) for v in raw.values()]

    async def some(self, gpus: Iterable[str]) -> list[dict[str, Any]]:
        """The latest samples of these GPUs (missing ones are skipped)."""
        wanted = list(gpus)
        if not wanted:
            return []
        raw = await self._redis.hmget(self.latest_key, wanted)
        return [json.loads(v) for v in raw if v is not None]

    async def node_gpus(self, node: str) -> set[str]:
        """GPUs a node has reported."""
        members = await self._redis.smembers(self._keys.key("node", node))
        return {m.decode() if isinstance(m, bytes) else str(m) for m in members}

    async def recent(self, gpu: str) -> list[dict[str, Any]]:
        """Recent samples of an allocated GPU, oldest first."""
        raw = await self._redis.lrange(self._keys.key("recent", gpu), 0, self._recent - 1)
        return [json.loads(v) for v in reversed(raw)]
