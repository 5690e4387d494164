"""Tenants and API keys: created through the admin API, replicated to every service for auth."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from libs.common.events import topics
from libs.common.events.base import Event

TOPIC = topics.PLATFORM


class TenantCreatedV1(Event):
    """A tenant was created."""

    type: Literal["platform.tenant.created.v1"] = "platform.tenant.created.v1"
    tenant_id: str = Field(description="Tenant id (slug).")
    name: str = Field(description="Display name.")

    def subject(self) -> str:
        return self.tenant_id


class ApiKeyIssuedV1(Event):
    """An API key was issued; only its SHA-256 hash travels, never the key."""

    type: Literal["platform.api_key.issued.v1"] = "platform.api_key.issued.v1"
    key_id: str = Field(description="Public id of the key (its prefix).")
    tenant_id: str | None = Field(description="Owning tenant; None for an admin key.")
    role: Literal["tenant", "admin"] = Field(description="What the key may do.")
    key_hash: str = Field(description="Hex SHA-256 of the secret key.")

    def subject(self) -> str:
        return self.tenant_id or "admin"


class ApiKeyRevokedV1(Event):
    """An API key was revoked and must no longer authenticate."""

    type: Literal["platform.api_key.revoked.v1"] = "platform.api_key.revoked.v1"
    key_id: str = Field(description="Public id of the key.")
    tenant_id: str | None = Field(description="Owning tenant; None for an admin key.")

    def subject(self) -> str:
        return self.tenant_id or "admin"


EVENTS: tuple[type[Event], ...] = (TenantCreatedV1, ApiKeyIssuedV1, ApiKeyRevokedV1)
