"""Per-tenant rate limits on every service's API: one token bucket per (tenant, service, class) in Redis.

Two classes: writes (POST, PUT, PATCH, DELETE) and reads (everything else), each with a rate and a burst
from the settings (``RATE_LIMIT_WRITE_PER_S``...; a rate of 0 turns the class off). Only requests that
present a tenant's key to a route that needs one are counted: the admin key is exempt, and a request
without a valid key is refused by the key check anyway. The check runs before the route does its work,
as the first dependency of every route, and is one ``EVALSHA`` of one Lua script (one round trip, atomic).

The bucket is kept as GCRA's theoretical arrival time (``tat``, in µs of Redis's clock, so every replica
shares it): a bucket holding ``n`` tokens is one whose ``tat`` is ``(burst - n) * interval`` ahead of now,
and a key that expired is a full bucket. A refusal answers 429 ``rate_limited`` with ``Retry-After`` (the
seconds until a token is back, rounded up). When Redis cannot be asked, requests go through unchecked (a
down Redis must not take the API down), with a warning at most once a minute and a metric.
"""

from libs.common.http.ratelimit._bucket import BUCKET_SCRIPT, BUCKET_SCRIPT_SHA, Decision, Limit, take
from libs.common.http.ratelimit._install import install_rate_limit
from libs.common.http.ratelimit._limiter import (
    RATE_LIMIT_FAIL_OPEN,
    RATE_LIMITED,
    REDIS_TIMEOUT_S,
    WARN_EVERY_S,
    WRITE_METHODS,
    RateLimited,
    RateLimiter,
)

__all__ = [
    "BUCKET_SCRIPT",
    "BUCKET_SCRIPT_SHA",
    "RATE_LIMITED",
    "RATE_LIMIT_FAIL_OPEN",
    "REDIS_TIMEOUT_S",
    "WARN_EVERY_S",
    "WRITE_METHODS",
    "Decision",
    "Limit",
    "RateLimited",
    "RateLimiter",
    "install_rate_limit",
    "take",
]
