"""Settings of the billing service (shared ones keep their names; its own take the BILLING_ prefix)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from libs.common.settings import BaseServiceSettings

__all__ = ["BillingSettings"]


class BillingSettings(BaseServiceSettings):
    """Settings of the billing service."""

    model_config = SettingsConfigDict(
        env_prefix="BILLING_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "billing"
    http_port: int = 8005
