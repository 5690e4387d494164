"""A browser session: the API key it acts with, who that key is, its CSRF token and its expiry."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Session", "token_digest"]


def token_digest(token: str) -> str:
    """What a session is stored under: the SHA-256 of its cookie token, so Redis never holds the cookie."""
    return hashlib.sha256(token.encode()).hexdigest()


class Session(BaseModel):
    """One browser's login; the API key never leaves the gateway."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    api_key: str = Field(repr=False, description="The key every proxied call is made with.")
    key_id: str = Field(description="The key's id, as the scheduler knows it.")
    tenant_id: str | None = Field(description="The key's tenant; None for the admin key.")
    role: Literal["tenant", "admin"] = Field(description="tenant or admin.")
    csrf_token: str = Field(repr=False, description="The double-submit token unsafe requests must echo.")
    expires_at: datetime = Field(description="When the session ends (UTC).")

    def expired(self, now: datetime) -> bool:
        """Whether the session has ended at ``now``."""
        return now >= self.expires_at

    def public(self) -> dict[str, Any]:
        """What the browser is told about its session (never the key)."""
        return {
            "tenant_id": self.tenant_id,
            "role": self.role,
            "key_id": self.key_id,
            "csrf_token": self.csrf_token,
            "expires_at": self.expires_at.isoformat(),
        }
