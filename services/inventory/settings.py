"""Settings of the inventory service (shared ones keep their names; its own take the INVENTORY_ prefix)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from libs.common.settings import BaseServiceSettings

__all__ = ["InventorySettings"]


class InventorySettings(BaseServiceSettings):
    """Settings of the inventory service."""

    model_config = SettingsConfigDict(
        env_prefix="INVENTORY_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "inventory"
    http_port: int = 8001
