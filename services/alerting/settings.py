"""Settings of the alerting service (shared ones keep their names; its own take the ALERTING_ prefix)."""

from __future__ import annotations

from pydantic import Field
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
    tick_interval_s: float = Field(
        default=0.25, gt=0, description="How often `for` timers, staleness and group timers advance."
    )
    offset_commit_interval_s: float = Field(
        default=1.0, ge=0, description="Sample offsets are committed at most this often."
    )
    staleness_s: float = Field(default=300.0, gt=0, description="A silent series resolves after this.")
    event_alert_ttl_s: float = Field(
        default=300.0, gt=0, description="Alerts raised by events (faults, budgets) resolve after this."
    )
    external_url: str = Field(default="http://127.0.0.1:8004", description="Link put in notifications.")
    default_receiver: str = Field(default="default", description="Receiver of the default route.")
    pagerduty_url: str = Field(
        default="https://events.pagerduty.com/v2/enqueue", description="Default PagerDuty Events v2 URL."
    )
    delivery_poll_s: float = Field(default=0.2, gt=0, description="Delivery worker's poll interval.")
    delivery_handover_s: float = Field(
        default=0.25,
        ge=0,
        description="After committing new notifications the evaluator pauses up to this long while the "
        "delivery worker sends them (a page goes out before more samples are evaluated), never more than a "
        "tenth of its time in all; 0 never pauses.",
    )
    delivery_timeout_s: float = Field(default=5.0, gt=0, description="HTTP timeout of one attempt.")
    delivery_concurrency: int = Field(default=16, ge=1, description="Requests in flight at once.")
    delivery_lease_s: float = Field(default=30.0, gt=0, description="How long a claimed delivery is held.")
    retry_base_s: float = Field(default=1.0, gt=0, description="Backoff base.")
    retry_cap_s: float = Field(default=300.0, gt=0, description="Backoff cap.")
    retry_max_attempts: int = Field(default=20, ge=1, description="Attempts before dead-lettering.")
    retry_max_age_s: float = Field(default=86_400.0, gt=0, description="Age before dead-lettering.")
