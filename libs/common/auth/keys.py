"""API keys: generated with `secrets`, shown once, stored only as a SHA-256 hash.

Keys carry 256 bits of randomness, so a fast hash is enough (no password stretching needed):
guessing a key is infeasible and the hash cannot be reversed.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

__all__ = ["IssuedKey", "constant_time_equal", "hash_key", "issue_key", "valid_tenant_id"]

_TENANT_ID = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A freshly issued key: the secret is returned to the caller once and never stored."""

    key_id: str
    secret: str
    key_hash: str


def hash_key(secret: str) -> str:
    """Hex SHA-256 of a key."""
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_key() -> IssuedKey:
    """A new key of the form ``gck_<key id>_<secret>``."""
    key_id = "k" + secrets.token_hex(6)
    secret = f"gck_{key_id}_{secrets.token_urlsafe(32)}"
    return IssuedKey(key_id=key_id, secret=secret, key_hash=hash_key(secret))


def constant_time_equal(a: str, b: str) -> bool:
    """Compare secrets without leaking their common prefix through timing."""
    return hmac.compare_digest(a.encode(), b.encode())


def valid_tenant_id(tenant_id: str) -> bool:
    """Tenant ids are lower-case slugs: letters, digits and dashes, 2 to 63 characters."""
    return bool(_TENANT_ID.match(tenant_id))
