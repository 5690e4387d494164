"""Settings of the inventory service (shared ones keep their names; its own take the INVENTORY_ prefix)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
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
    #: A fleet file (POST /v1/admin/fleet) may be this large; every other path keeps max_request_bytes
    #: (1 MiB), so what an unauthenticated caller can make the service buffer stays small.
    max_fleet_request_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="Largest fleet-file body accepted (413 above it): room for a 16 MiB fleet file.",
    )
    fleet_file: Path | None = Field(
        default=None, description="A fleet YAML registered at start (idempotent); unset: none."
    )
    unit_reference_model: str = Field(
        default="A100-80GB", description="The GPU model compute units are measured against."
    )
    units_per_reference: int = Field(default=8, gt=0, description="Units one reference GPU is worth.")
