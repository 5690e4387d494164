"""Settings of the gateway: no database and no broker, so not BaseServiceSettings (which carries both).

Shared settings keep their well-known names (``ENVIRONMENT``, ``REDIS_URL``...); the gateway's own take
the ``GATEWAY_`` prefix. ``GATEWAY_COOKIE_SECURE`` defaults to true outside development and may not be
turned off there.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from libs.common.db.migrate import SERVICES
from libs.common.settings import Environment

__all__ = ["DEFAULT_CONSOLE_DIR", "GatewaySettings"]

#: The console's build output in this repository (``make install`` builds it).
DEFAULT_CONSOLE_DIR = Path(__file__).resolve().parents[2] / "console" / "dist"
_UPSTREAM_BASE_PORT = 8001  # the services' default ports, in the order of SERVICES (libs.devkit.devstack)


def _default_url(service: str) -> str:
    return f"http://127.0.0.1:{_UPSTREAM_BASE_PORT + SERVICES.index(service)}"


class GatewaySettings(BaseSettings):
    """Settings of the gateway."""

    model_config = SettingsConfigDict(
        env_prefix="GATEWAY_", extra="ignore", populate_by_name=True, frozen=True
    )

    service_name: str = "gateway"
    environment: Environment = Field(default="development", alias="ENVIRONMENT")
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", alias="REDIS_URL")
    redis_prefix: str = Field(default="gpucloud:", alias="REDIS_PREFIX")
    http_host: str = Field(default="127.0.0.1", alias="HTTP_HOST")
    http_port: int = Field(default=8000, ge=0, le=65535)
    log_level: str = Field(default="INFO", alias="LOG_LEVEL")
    log_json: bool = Field(default=True, alias="LOG_JSON")
    inventory_url: str = Field(default=_default_url("inventory"), description="Where inventory answers.")
    scheduler_url: str = Field(default=_default_url("scheduler"), description="Where the scheduler answers.")
    telemetry_url: str = Field(default=_default_url("telemetry"), description="Where telemetry answers.")
    alerting_url: str = Field(default=_default_url("alerting"), description="Where alerting answers.")
    billing_url: str = Field(default=_default_url("billing"), description="Where billing answers.")
    recovery_url: str = Field(default=_default_url("recovery"), description="Where recovery answers.")
    session_ttl_s: float = Field(default=8 * 3600, gt=0, le=30 * 86400, description="A session's life, s.")
    cookie_secure: bool | None = Field(
        default=None, description="Mark cookies Secure (HTTPS only); default: true outside development."
    )
    public_origin: str = Field(
        default="",
        description="The origin browsers see (https://console.example.com) behind a TLS proxy; empty: "
        "the request's own scheme and Host.",
    )
    heartbeat_s: float = Field(default=15.0, gt=0, le=300, description="Comment line period on live streams.")
    live_poll_s: float = Field(default=1.0, gt=0, le=60, description="Alerts and incidents poll period.")
    console_dir: Path = Field(default=DEFAULT_CONSOLE_DIR, description="The built console (index.html).")
    resume_buffer: int = Field(
        default=256, ge=1, le=100_000, description="Events kept per stream for resume."
    )
    stream_expiry_s: float = Field(
        default=60.0, gt=0, le=3600, description="How long a closed stream stays resumable."
    )
    max_request_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="Largest request body proxied (413 above it); each service still applies its own.",
    )
    upstream_timeout_s: float = Field(default=30.0, gt=0, le=600, description="Connect and read timeout.")

    @model_validator(mode="after")
    def _refuse_insecure_cookies_outside_development(self) -> GatewaySettings:
        if self.environment != "development" and self.cookie_secure is False:
            raise ValueError(
                f"GATEWAY_COOKIE_SECURE=false is only allowed when ENVIRONMENT=development, "
                f"not {self.environment}"
            )
        return self

    @property
    def secure_cookies(self) -> bool:
        """Whether cookies carry the Secure attribute."""
        return self.environment != "development" if self.cookie_secure is None else self.cookie_secure

    @property
    def upstreams(self) -> dict[str, str]:
        """Service name -> base URL (no trailing slash), in the order of SERVICES."""
        return {service: str(getattr(self, f"{service}_url")).rstrip("/") for service in SERVICES}
