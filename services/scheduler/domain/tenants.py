"""Tenants as the admin API shows them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["IssuedKey", "Tenant"]


@dataclass(frozen=True, slots=True)
class Tenant:
    """A tenant: its slug, display name and when it was created."""

    tenant_id: str
    name: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key as issued: the secret is known only at this moment (only its hash is stored)."""

    key_id: str
    tenant_id: str | None
    role: str
    api_key: str
