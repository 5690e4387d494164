"""The bucket's arithmetic: a pure model (``take``) and the Lua script that runs it in Redis."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

__all__ = ["BUCKET_SCRIPT", "BUCKET_SCRIPT_SHA", "Decision", "Limit", "take"]


@dataclass(frozen=True, slots=True)
class Limit:
    """One class of requests: ``rate_per_s`` tokens come back a second, at most ``burst`` are kept."""

    name: Literal["writes", "reads"]
    rate_per_s: float
    burst: int

    @property
    def enabled(self) -> bool:
        """A rate of 0 turns the class off."""
        return self.rate_per_s > 0 and self.burst > 0

    @property
    def interval_us(self) -> int:
        """Microseconds per token (integer, so the script and the model compute exactly alike)."""
        return max(1, round(1_000_000 / self.rate_per_s))

    @property
    def kind(self) -> str:
        """How a message names the class: 'write' or 'read'."""
        return self.name[:-1]


@dataclass(frozen=True, slots=True)
class Decision:
    """One request's answer: let through or not, the whole tokens left, how long until the next one."""

    allowed: bool
    remaining: int
    retry_after_us: int

    @property
    def retry_after_s(self) -> int:
        """``Retry-After``: whole seconds until a token is back, rounded up (at least 1 when refused)."""
        return -(-self.retry_after_us // 1_000_000)


def take(*, tat_us: int | None, now_us: int, limit: Limit) -> tuple[Decision, int]:
    """Take one token from a bucket at ``now_us``: the decision and the bucket's state afterwards.

    The pure model of what ``BUCKET_SCRIPT`` runs in Redis. ``tat_us`` is the bucket's state (None: absent,
    a full bucket); a refusal leaves it as it was.
    """
    interval, allowance = limit.interval_us, limit.interval_us * limit.burst
    tat = max(now_us if tat_us is None else tat_us, now_us)
    ahead = tat + interval - now_us
    if ahead > allowance:
        return Decision(allowed=False, remaining=0, retry_after_us=ahead - allowance), tat
    return Decision(allowed=True, remaining=(allowance - ahead) // interval, retry_after_us=0), tat + interval


#: KEYS[1] the bucket; ARGV[1] µs per token, ARGV[2] burst, ARGV[3] now in µs (tests; else Redis's TIME).
#: Answers {allowed, remaining, retry_after_us}. The state is written with %.0f: a µs timestamp's plain
#: digits, whatever text a Redis version makes of a Lua number (Lua's own tostring keeps 14 digits).
BUCKET_SCRIPT = """
local interval = tonumber(ARGV[1])
local allowance = interval * tonumber(ARGV[2])
local now
if ARGV[3] then
  now = tonumber(ARGV[3])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local ahead = tat + interval - now
if ahead > allowance then
  return {0, 0, ahead - allowance}
end
redis.call('SET', KEYS[1], string.format('%.0f', tat + interval), 'PX', math.ceil(ahead / 1000))
return {1, math.floor((allowance - ahead) / interval), 0}
"""
BUCKET_SCRIPT_SHA = hashlib.sha1(BUCKET_SCRIPT.encode(), usedforsecurity=False).hexdigest()
