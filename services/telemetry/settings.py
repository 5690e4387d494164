"""Settings of the telemetry service (shared ones keep their names; its own take the TELEMETRY_ prefix)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from libs.common.settings import BaseServiceSettings

__all__ = ["TelemetrySettings"]


class TelemetrySettings(BaseServiceSettings):
    """Settings of the telemetry service."""

    model_config = SettingsConfigDict(
        env_prefix="TELEMETRY_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "telemetry"
    http_port: int = 8003
