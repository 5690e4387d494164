"""Live quota usage in Redis: one Lua script checks and reserves, one releases; rebuilt from Postgres.

Per tenant one hash holds the limits (``lim_<dim>``, absent = unlimited) and the usage (``<dim>``), and a
second hash maps each holding placement to its demand, so reserve and release are idempotent per
placement. A marker key says the state was built from Postgres: without it (Redis lost its data) both
scripts answer ``rebuild`` instead of counting against an empty slate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from libs.common.redis import Keyspace
from services.scheduler.quota import DIMENSIONS, QuotaLimits, QuotaUsage

__all__ = ["HeldQuota", "QuotaStore", "RebuildNeeded", "RedisQuotaStore"]


class RebuildNeeded(Exception):
    """Redis lost the quota state (marker missing); rebuild it from Postgres, then retry."""


@dataclass(frozen=True, slots=True)
class HeldQuota:
    """One live placement's demand, as Postgres records it (the input of a rebuild)."""

    tenant: str
    placement_id: str
    demand: QuotaUsage


class QuotaStore(Protocol):
    """Per-tenant limits and usage; reserve/release are atomic and idempotent per placement."""

    async def reserve(self, *, tenant: str, placement_id: str, demand: QuotaUsage) -> tuple[str, ...]:
        """Reserve or name the dimensions over their limit (empty tuple = reserved)."""
        ...

    async def release(self, *, tenant: str, placement_id: str) -> bool:
        """Give a placement's demand back; False when it held nothing."""
        ...

    async def reserve_many(self, items: Sequence[tuple[str, str, QuotaUsage]]) -> list[tuple[str, ...]]:
        """``reserve`` for each (tenant, placement id, demand) in order, each atomic on its own."""
        ...

    async def release_many(self, items: Sequence[tuple[str, str]]) -> list[bool]:
        """``release`` for each (tenant, placement id) in order."""
        ...

    async def set_limits(self, *, tenant: str, limits: QuotaLimits) -> None:
        """Replace a tenant's limits."""
        ...

    async def usage(self, *, tenant: str) -> QuotaUsage:
        """What the tenant holds now."""
        ...

    async def intact(self) -> bool:
        """Whether the state was built from Postgres and not lost since."""
        ...

    async def rebuild(self, *, limits: Mapping[str, QuotaLimits], held: Sequence[HeldQuota]) -> None:
        """Replace everything with the given limits and live placements, then set the marker."""
        ...


_RESERVE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'rebuild'} end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return {'ok'} end
local dims = {'gpus', 'units_milli', 'workloads'}
local over = {}
for i, d in ipairs(dims) do
  local lim = redis.call('HGET', KEYS[2], 'lim_' .. d)
  if lim then
    local used = tonumber(redis.call('HGET', KEYS[2], d) or '0')
    if used + tonumber(ARGV[i + 1]) > tonumber(lim) then table.insert(over, d) end
  end
end
if #over > 0 then return over end
for i, d in ipairs(dims) do redis.call('HINCRBY', KEYS[2], d, ARGV[i + 1]) end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. ',' .. ARGV[3] .. ',' .. ARGV[4])
return {'ok'}
"""

_RELEASE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'rebuild' end
local held = redis.call('HGET', KEYS[3], ARGV[1])
if not held then return 'absent' end
local dims = {'gpus', 'units_milli', 'workloads'}
local i = 1
for amount in string.gmatch(held, '[^,]+') do
  local left = tonumber(redis.call('HGET', KEYS[2], dims[i]) or '0') - tonumber(amount)
  if left < 0 then left = 0 end
  redis.call('HSET', KEYS[2], dims[i], left)
  i = i + 1
end
redis.call('HDEL', KEYS[3], ARGV[1])
return 'ok'
"""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisQuotaStore:
    """The QuotaStore on Redis, every change one Lua script (or one MULTI for limits and rebuilds)."""

    def __init__(self, *, redis: Redis, keys: Keyspace) -> None:
        self._redis = redis
        self._keys = keys.child("quota")
        self._reserve = redis.register_script(_RESERVE)
        self._release = redis.register_script(_RELEASE)

    def _tenant_keys(self, tenant: str) -> list[str]:
        return [self._keys.key("marker"), self._keys.key("t", tenant), self._keys.key("held", tenant)]

    async def reserve(self, *, tenant: str, placement_id: str, demand: QuotaUsage) -> tuple[str, ...]:
        args: list[str | int] = [placement_id, demand.gpus, demand.units_milli, demand.workloads]
        answer = [_text(v) for v in await self._reserve(keys=self._tenant_keys(tenant), args=args)]
        if answer == ["rebuild"]:
            raise RebuildNeeded("quota marker missing")
        return () if answer == ["ok"] else tuple(answer)

    async def release(self, *, tenant: str, placement_id: str) -> bool:
        answer = _text(await self._release(keys=self._tenant_keys(tenant), args=[placement_id]))
        if answer == "rebuild":
            raise RebuildNeeded("quota marker missing")
        return answer == "ok"

    async def reserve_many(self, items: Sequence[tuple[str, str, QuotaUsage]]) -> list[tuple[str, ...]]:
        """One round trip: a pipeline of reserve scripts (each still one atomic script, in order)."""
        if not items:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for tenant, placement_id, d in items:
                args: list[str | int] = [placement_id, d.gpus, d.units_milli, d.workloads]
                await self._reserve(keys=self._tenant_keys(tenant), args=args, client=pipe)
            raw = await pipe.execute()
        answers = [[_text(v) for v in a] for a in raw]
        if any(a == ["rebuild"] for a in answers):
            raise RebuildNeeded("quota marker missing")
        return [() if a == ["ok"] else tuple(a) for a in answers]

    async def release_many(self, items: Sequence[tuple[str, str]]) -> list[bool]:
        """One round trip: a pipeline of release scripts."""
        if not items:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for tenant, placement_id in items:
                await self._release(keys=self._tenant_keys(tenant), args=[placement_id], client=pipe)
            answers = [_text(a) for a in await pipe.execute()]
        if "rebuild" in answers:
            raise RebuildNeeded("quota marker missing")
        return [a == "ok" for a in answers]

    async def set_limits(self, *, tenant: str, limits: QuotaLimits) -> None:
        key = self._keys.key("t", tenant)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(key, *(f"lim_{d}" for d in DIMENSIONS))
            values: dict[FieldT, EncodableT] = {
                f"lim_{d}": getattr(limits, d) for d in DIMENSIONS if getattr(limits, d) is not None
            }
            if values:
                pipe.hset(key, mapping=values)
            await pipe.execute()

    async def usage(self, *, tenant: str) -> QuotaUsage:
        raw = await self._redis.hmget(self._keys.key("t", tenant), list(DIMENSIONS))
        return QuotaUsage(*(int(v or 0) for v in raw))

    async def intact(self) -> bool:
        return bool(await self._redis.exists(self._keys.key("marker")))

    async def rebuild(self, *, limits: Mapping[str, QuotaLimits], held: Sequence[HeldQuota]) -> None:
        stale = [k async for k in self._redis.scan_iter(match=self._keys.key("*"), count=1000)]
        tenants: dict[str, dict[FieldT, EncodableT]] = {}
        for tenant, lim in limits.items():
            entry = tenants.setdefault(tenant, dict.fromkeys(DIMENSIONS, 0))
            entry.update({f"lim_{d}": getattr(lim, d) for d in DIMENSIONS if getattr(lim, d) is not None})
        async with self._redis.pipeline(transaction=True) as pipe:
            if stale:
                pipe.delete(*stale)
            for h in held:
                entry = tenants.setdefault(h.tenant, dict.fromkeys(DIMENSIONS, 0))
                for d in DIMENSIONS:
                    entry[d] += getattr(h.demand, d)
                demand = ",".join(str(getattr(h.demand, d)) for d in DIMENSIONS)
                pipe.hset(self._keys.key("held", h.tenant), h.placement_id, demand)
            for tenant, mapping in tenants.items():
                pipe.hset(self._keys.key("t", tenant), mapping=mapping)
            pipe.set(self._keys.key("marker"), "1")
            await pipe.execute()
