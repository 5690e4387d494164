"""Helpers shared by the benchmarks: result lines, percentiles, CPU time, a throwaway environment."""

from __future__ import annotations

import json
import math
import os
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from libs.common.redis import Keyspace, create_redis

__all__ = ["BenchEnv", "cpu_seconds", "emit", "percentile"]


def emit(bench: str, metric: str, value: float, unit: str, **extra: object) -> None:
    """Print one result line: {"bench", "metric", "value", "unit", ...}."""
    line = {"bench": bench, "metric": metric, "value": round(value, 4), "unit": unit, **extra}
    print(json.dumps(line), flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class BenchEnv:
    """Where a benchmark runs: the real Postgres and Redis, and names nobody else uses."""

    token: str
    database_url: str
    redis_url: str

    @classmethod
    def create(cls) -> BenchEnv:
        return cls(
            token=secrets.token_hex(3),
            database_url=os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
            redis_url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        )

    def schema(self, name: str) -> str:
        return f"bench{self.token}_{name}"

    @property
    def topic_prefix(self) -> str:
        return f"bench{self.token}."

    @property
    def redis_prefix(self) -> str:
        return f"bench{self.token}:"

    async def drop(self, *services: str) -> None:
        """Remove what the benchmark left: the services' schemas and every key under ``redis_prefix``."""
        conn = await asyncpg.connect(self.database_url)
        try:
            for service in services:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema(service)}" CASCADE')
        finally:
            await conn.close()
        redis = create_redis(self.redis_url)
        try:
            await Keyspace(self.redis_prefix).clear(redis)
        finally:
            await redis.aclose()


def log(message: str) -> None:
    """Progress on stderr, so stdout holds only result lines."""
    print(message, file=sys.stderr, flush=True)
