"""The gateway's settings: defaults, one URL per service, and cookies that must be Secure in production."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from libs.common.db.migrate import SERVICES
from services.gateway.settings import DEFAULT_CONSOLE_DIR, GatewaySettings


def test_defaults_match_the_development_stack() -> None:
    settings = GatewaySettings(_env_file=None)
    assert settings.http_port == 8000
    assert settings.session_ttl_s == 8 * 3600
    assert settings.heartbeat_s == 15
    assert settings.live_poll_s == 1.0
    assert settings.resume_buffer == 256
    assert settings.stream_expiry_s == 60
    assert settings.console_dir == DEFAULT_CONSOLE_DIR
    assert DEFAULT_CONSOLE_DIR.parts[-2:] == (
        "console",
        "dist",
    )
    assert list(settings.upstreams) == list(SERVICES)
    assert settings.upstreams["inventory"] == "http://127.0.0.1:8001"
    assert settings.upstreams["recovery"] == "http://127.0.0.1:8006"
    assert settings.secure_cookies is False  # development


def test_upstreams_and_timings_come_from_gateway_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_TELEMETRY_URL", "http://telemetry:8003/")
    monkeypatch.setenv("GATEWAY_HEARTBEAT_S", "0.5")
    monkeypatch.setenv("GATEWAY_HTTP_PORT", "9000")
    settings = GatewaySettings()
    assert settings.upstreams["telemetry"] == "http://telemetry:8003"
    assert settings.heartbeat_s == 0.5
    assert settings.http_port == 9000


def test_cookies_are_secure_outside_development_and_may_not_be_made_insecure_there() -> None:
    assert GatewaySettings(environment="production").secure_cookies is True
    assert GatewaySettings(environment="development", cookie_secure=True).secure_cookies is True
    with pytest.raises(ValidationError, match="GATEWAY_COOKIE_SECURE=false"):
        GatewaySettings(environment="production", cookie_secure=False)


@pytest.mark.parametrize(("name", "value"), [("resume_buffer", 0), ("heartbeat_s", 0), ("session_ttl_s", -1)])
def test_nonsense_values_are_refused_naming_the_field(name: str, value: float) -> None:
    with pytest.raises(ValidationError, match=name):
        GatewaySettings.model_validate({name: value})
