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
from redis.exceptions import RedisError
from redis.typing import EncodableT, FieldT

from libs.common.redis import Keyspace
from services.scheduler.domain.quota import DIMENSIONS, QuotaLimits, QuotaUsage

__all__ = ["HeldQuota", "QuotaStore", "RebuildNeeded", "RedisError", "RedisQuotaStore"]


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


#: Reserve for each item in order: KEYS[1] is the marker, tenant t of the batch has KEYS[2t] (its hash)
#: and KEYS[2t+1] (its held placements), and item n is ARGV[5n-4..5n] (t, placement id, gpus,
#: units_milli, workloads). Answers 'rebuild' without the marker, else per item '' (reserved) or the
#: dimensions over their limit, comma-separated: a flat list, cheap to read back for thousands.
_RESERVE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'rebuild' end
local dims = {'gpus', 'units_milli', 'workloads'}
local answers = {}
for n = 1, #ARGV / 5 do
  local a = 5 * (n - 1)
  local t = tonumber(ARGV[a + 1])
  local tenant, held = KEYS[2 * t], KEYS[2 * t + 1]
  local answer = ''
  if redis.call('HEXISTS', held, ARGV[a + 2]) == 0 then
    local over = {}
    for i, d in ipairs(dims) do
      local lim = redis.call('HGET', tenant, 'lim_' .. d)
      if lim then
        local used = tonumber(redis.call('HGET', tenant, d) or '0')
        if used + tonumber(ARGV[a + i + 2]) > tonumber(lim) then table.insert(over, d) end
      end
    end
    if #over > 0 then
      answer = table.concat(over, ',')
    else
      for i, d in ipairs(dims) do redis.call('HINCRBY', tenant, d, ARGV[a + i + 2]) end
      redis.call('HSET', held, ARGV[a + 2], ARGV[a + 3] .. ',' .. ARGV[a + 4] .. ',' .. ARGV[a + 5])
    end
  end
  answers[n] = answer
end
return answers
"""

#: Release for each item in order (keys as for ``_RESERVE``, item n is ARGV[2n-1..2n]: t, placement id):
#: per item 'ok', or 'absent' when it held nothing; 'rebuild' without the marker.
_RELEASE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'rebuild' end
local dims = {'gpus', 'units_milli', 'workloads'}
local answers = {}
for n = 1, #ARGV / 2 do
  local t = tonumber(ARGV[2 * n - 1])
  local tenant, held, pid = KEYS[2 * t], KEYS[2 * t + 1], ARGV[2 * n]
  local demand = redis.call('HGET', held, pid)
  if demand then
    local i = 1
    for amount in string.gmatch(demand, '[^,]+') do
      local left = tonumber(redis.call('HGET', tenant, dims[i]) or '0') - tonumber(amount)
      if left < 0 then left = 0 end
      redis.call('HSET', tenant, dims[i], left)
      i = i + 1
    end
    redis.call('HDEL', held, pid)
    answers[n] = 'ok'
  else
    answers[n] = 'absent'
  end
end
return answers
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

    def _keys_of(self, tenants: Sequence[str]) -> tuple[list[str], list[int]]:
        """The marker, then each distinct tenant's usage hash and held-placements hash, as the scripts take
        them; and each item's tenant number there."""
        keys, index = [self._keys.key("marker")], dict[str, int]()
        for tenant in tenants:
            if tenant not in index:
                index[tenant] = len(index) + 1
                keys += [self._keys.key("t", tenant), self._keys.key("held", tenant)]
        return keys, [index[t] for t in tenants]

    async def reserve(self, *, tenant: str, placement_id: str, demand: QuotaUsage) -> tuple[str, ...]:
        return (await self.reserve_many([(tenant, placement_id, demand)]))[0]

    async def release(self, *, tenant: str, placement_id: str) -> bool:
        return (await self.release_many([(tenant, placement_id)]))[0]

    async def reserve_many(self, items: Sequence[tuple[str, str, QuotaUsage]]) -> list[tuple[str, ...]]:
        """One script call, so one round trip and one atomic step for the whole batch, items in order."""
        if not items:
            return []
        keys, tenants = self._keys_of([t for t, _p, _d in items])
        args: list[EncodableT] = []
        for t, (_tenant, placement_id, d) in zip(tenants, items, strict=True):
            args += [t, placement_id, d.gpus, d.units_milli, d.workloads]
        raw = await self._reserve(keys=keys, args=args)
        if not isinstance(raw, list):
            raise RebuildNeeded("quota marker missing")
        return [tuple(_text(a).split(",")) if a else () for a in raw]

    async def release_many(self, items: Sequence[tuple[str, str]]) -> list[bool]:
        """One script call for the whole batch, items in order."""
        if not items:
            return []
        keys, tenants = self._keys_of([t for t, _p in items])
        args: list[EncodableT] = []
        for t, (_tenant, placement_id) in zip(tenants, items, strict=True):
            args += [t, placement_id]
        raw = await self._release(keys=keys, args=args)
        if not isinstance(raw, list):
            raise RebuildNeeded("quota marker missing")
        return [_text(a) == "ok" for a in raw]

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
