"""The limiter of one service: a token of the request's class for its tenant, one EVALSHA; fails open."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter
from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError

from libs.common.http.errors import ApiError
from libs.common.http.ratelimit._bucket import BUCKET_SCRIPT, BUCKET_SCRIPT_SHA, Decision, Limit
from libs.common.redis import Keyspace

if TYPE_CHECKING:  # the runtime imports auth, which imports this package's errors
    from libs.common.runtime import ServiceRuntime

__all__ = [
    "RATE_LIMITED",
    "RATE_LIMIT_FAIL_OPEN",
    "REDIS_TIMEOUT_S",
    "WARN_EVERY_S",
    "WRITE_METHODS",
    "RateLimited",
    "RateLimiter",
]

log = logging.getLogger("libs.common.http.ratelimit")

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: How long a request waits for Redis before it is let through unchecked.
REDIS_TIMEOUT_S = 0.5
#: At most one "Redis unreachable" warning this often (seconds).
WARN_EVERY_S = 60.0

RATE_LIMITED = Counter(
    "gpucloud_rate_limited_total", "Requests refused 429 by a tenant's rate limit.", ["service", "limit"]
)
RATE_LIMIT_FAIL_OPEN = Counter(
    "gpucloud_rate_limit_fail_open_total",
    "Requests let through unchecked because Redis could not be asked.",
    ["service"],
)


class RateLimited(ApiError):
    """A tenant went over one of its rate limits: 429 with ``Retry-After``."""

    status, code = 429, "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int, details: Any = None) -> None:
        super().__init__(message, details=details)
        self.retry_after_s = retry_after_s


class RateLimiter:
    """The buckets of one service: ``check`` takes a token of the request's class for its tenant."""

    def __init__(
        self,
        *,
        service: str,
        keys: Keyspace,
        writes: Limit,
        reads: Limit,
        redis: Callable[[], Redis],
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float = REDIS_TIMEOUT_S,
    ) -> None:
        self.service = service
        self.writes, self.reads = writes, reads
        self._keys = keys
        self._redis = redis
        self._clock = clock
        self._timeout_s = timeout_s
        self._warned_at: float | None = None
        self._unchecked = 0

    @classmethod
    def of(cls, runtime: ServiceRuntime) -> RateLimiter:
        """The limiter a service's runtime configures (its settings, its Redis, its key namespace)."""
        s = runtime.settings
        return cls(
            service=s.service_name,
            keys=Keyspace(s.redis_prefix).child(s.service_name).child("ratelimit"),
            writes=Limit("writes", s.rate_limit_write_per_s, s.rate_limit_write_burst),
            reads=Limit("reads", s.rate_limit_read_per_s, s.rate_limit_read_burst),
            redis=lambda: runtime.redis,
        )

    def limit_of(self, method: str) -> Limit:
        """The class of a request by its method."""
        return self.writes if method.upper() in WRITE_METHODS else self.reads

    def key(self, tenant: str, limit: Limit) -> str:
        """The bucket of one tenant and class in this service."""
        return self._keys.key(tenant, limit.name)

    async def check(self, *, tenant: str, method: str) -> Decision | None:
        """Take a token; None when the class is off or Redis could not be asked (let through)."""
        limit = self.limit_of(method)
        if not limit.enabled:
            return None
        try:
            async with asyncio.timeout(self._timeout_s):
                raw = await self._evaluate(self._redis(), self.key(tenant, limit), limit)
        except (RedisError, OSError) as exc:  # TimeoutError is an OSError
            self._let_through(exc)
            return None
        allowed, remaining, retry_after_us = (int(v) for v in raw)
        if not allowed:
            RATE_LIMITED.labels(self.service, limit.name).inc()
        return Decision(allowed=bool(allowed), remaining=remaining, retry_after_us=retry_after_us)

    async def refuse_over_limit(self, *, tenant: str, method: str) -> None:
        """Raise ``RateLimited`` naming the limit when the tenant has no token left for this request."""
        decision = await self.check(tenant=tenant, method=method)
        if decision is None or decision.allowed:
            return
        limit, wait_s = self.limit_of(method), decision.retry_after_s
        raise RateLimited(
            f"rate limit exceeded: tenant {tenant!r} may send {limit.rate_per_s:g} {limit.kind} requests "
            f"a second to {self.service} (bursts of {limit.burst}); retry in {wait_s} s",
            retry_after_s=wait_s,
            details={
                "limit": limit.name,
                "rate_per_s": limit.rate_per_s,
                "burst": limit.burst,
                "retry_after_s": wait_s,
            },
        )

    @staticmethod
    async def _evaluate(redis: Redis, key: str, limit: Limit) -> list[Any]:
        """One EVALSHA; the script is loaded (once per Redis) only when Redis does not know it."""
        args = (key, limit.interval_us, limit.burst)
        try:
            raw = await redis.evalsha(BUCKET_SCRIPT_SHA, 1, *args)
        except NoScriptError:
            await redis.script_load(BUCKET_SCRIPT)
            raw = await redis.evalsha(BUCKET_SCRIPT_SHA, 1, *args)
        return list(raw)

    def _let_through(self, exc: BaseException) -> None:
        RATE_LIMIT_FAIL_OPEN.labels(self.service).inc()
        self._unchecked += 1
        now = self._clock()
        if self._warned_at is not None and now - self._warned_at < WARN_EVERY_S:
            return
        log.warning(
            "rate limits not enforced: Redis could not be asked (%s: %s); %d request(s) let through "
            "unchecked since the last warning",
            type(exc).__name__,
            exc,
            self._unchecked,
        )
        self._warned_at, self._unchecked = now, 0
