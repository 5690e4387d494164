"""Tenants and API keys: hashing, the caller dependency and replication (the admin API is the scheduler's)."""

from libs.common.auth.keys import hash_key, issue_key
from libs.common.auth.principal import Admin, Caller, Principal, authenticate, require_admin, tenant_filter

__all__ = [
    "Admin",
    "Caller",
    "Principal",
    "authenticate",
    "hash_key",
    "issue_key",
    "require_admin",
    "tenant_filter",
]
