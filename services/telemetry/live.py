"""Live state in Redis: the latest sample of every GPU, the GPUs of every node, recent samples.

Keys (under the runtime's keyspace): ``latest`` hash gpu -> JSON sample (with node and at),
``node:<hostname>`` set of its GPUs, ``nodes`` set, ``recent:<gpu>`` list (newest first) kept only
for allocated GPUs, which is all the hints need. All of it is rebuilt by replaying telemetry.samples.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from libs.common.redis import Keyspace

__all__ = ["LiveState"]


class LiveState:
    """Reads and writes the live keys."""

    def __init__(self, *, redis: Redis, keys: Keyspace, recent: int) -> None:
        self._redis = redis
        self._keys = keys
        self._recent = recent
        self.latest_key = keys.key("latest")

    def write_batch(
        self, pipe: Pipeline, *, node: str, entries: Mapping[str, bytes], recent: Iterable[str]
    ) -> None:
        """Queue one node batch on a pipeline: latest values, node membership, recent lists."""
        mapping: dict[Any, Any] = dict(entries)
        pipe.hset(self.latest_key, mapping=mapping)
        pipe.sadd(self._keys.key("node", node), *entries)
        pipe.sadd(self._keys.key("nodes"), node)
        for gpu in recent:
            key = self._keys.key("recent", gpu)
            pipe.lpush(key, entries[gpu])
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
