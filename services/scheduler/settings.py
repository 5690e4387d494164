"""Settings of the scheduler service (shared ones keep their names; its own take the SCHEDULER_ prefix)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from libs.common.settings import BaseServiceSettings

__all__ = ["SchedulerSettings"]


class SchedulerSettings(BaseServiceSettings):
    """Settings of the scheduler service."""

    model_config = SettingsConfigDict(
        env_prefix="SCHEDULER_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "scheduler"
    http_port: int = 8002
