"""Settings of the scheduler service (shared ones keep their names; its own take the SCHEDULER_ prefix)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
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
    #: A job array (POST /v1/workload-arrays, up to 10,000 items) may be this large; every other path
    #: keeps max_request_bytes (1 MiB).
    max_array_request_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="Largest job-array body accepted (413 above it): room for 10,000 items.",
    )
    pass_interval_s: float = Field(default=1.0, gt=0, description="Longest wait between schedule passes.")
    lock_retry_s: float = Field(default=1.0, gt=0, description="How often a standby tries to become placer.")
    half_life_hours: float = Field(default=168.0, gt=0, description="Fair-share usage half-life (7 days).")
    high_threshold: float = Field(default=0.5, ge=0, le=1, description="Priority counted as high.")
    high_cap: float = Field(default=0.8, ge=0, le=1, description="Share of a pool high work may hold.")
    preemption_grace_s: float = Field(default=300.0, ge=0, description="Grace before a victim is stopped.")
    default_shares: float = Field(default=1.0, gt=0, description="Shares of a tenant with none set.")
    history_min_samples: int = Field(default=3, ge=1, description="Below this, history is 'too thin'.")
    image_catalog_file: Path | None = Field(
        default=None, description="An images file replacing the packaged catalog (images.yaml's shape)."
    )
    image_references: dict[str, str] = Field(
        default_factory=dict,
        description='OCI references by "name:version", replacing the catalog\'s (JSON, e.g. a mirror).',
    )
    log_retention_s: float = Field(
        default=7 * 86400.0, gt=0, description="Log objects older than this (last modified) are deleted."
    )
    output_retention_s: float = Field(
        default=7 * 86400.0, gt=0, description="A placement's outputs older than this are deleted."
    )
    retention_sweep_s: float = Field(
        default=3600.0, gt=0, description="How often the placer's replica sweeps logs and outputs."
    )
