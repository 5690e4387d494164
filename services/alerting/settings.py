"""Settings of the alerting service (shared ones keep their names; its own take the ALERTING_ prefix)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from libs.common.settings import BaseServiceSettings

__all__ = ["AlertingSettings"]


class AlertingSettings(BaseServiceSettings):
    """Settings of the alerting service."""

    model_config = SettingsConfigDict(
        env_prefix="ALERTING_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "alerting"
    http_port: int = 8004
