"""Settings of the recovery service (shared ones keep their names; its own take the RECOVERY_ prefix)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from libs.common.settings import BaseServiceSettings

__all__ = ["RecoverySettings"]


class RecoverySettings(BaseServiceSettings):
    """Settings of the recovery service."""

    model_config = SettingsConfigDict(
        env_prefix="RECOVERY_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "recovery"
    http_port: int = 8006
