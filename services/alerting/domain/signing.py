"""Webhook signatures: HMAC-SHA256 so receivers can check a request came from us, unaltered and recent.

Headers on every delivery:
    X-GpuCloud-Timestamp: <unix seconds>
    X-GpuCloud-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + raw body)>
The timestamp is inside the signed message so a captured request cannot be replayed later with a new one.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "sign", "verify"]

SIGNATURE_HEADER = "X-GpuCloud-Signature"
TIMESTAMP_HEADER = "X-GpuCloud-Timestamp"
_SCHEME = "sha256="


def _digest(secret: bytes, timestamp: int, body: bytes) -> str:
    return hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(*, secret: bytes, body: bytes, timestamp: int) -> dict[str, str]:
    """Headers to send with `body` at `timestamp` (unix seconds, from the caller's clock)."""
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: _SCHEME + _digest(secret, timestamp, body)}


def verify(
    *, secret: bytes, body: bytes, headers: Mapping[str, str], now: int, tolerance_s: int = 300
) -> bool:
    """Receiver side: the signature matches and the timestamp is within `tolerance_s` of `now`."""
    lowered = {k.lower(): v for k, v in headers.items()}
    stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
    given = lowered.get(SIGNATURE_HEADER.lower(), "")
    if not stamp.isdigit() or not given.startswith(_SCHEME):
        return False
    if abs(now - int(stamp)) > tolerance_s:
        return False
    return hmac.compare_digest(given[len(_SCHEME) :], _digest(secret, int(stamp), body))
