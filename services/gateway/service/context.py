"""What the gateway's routes share: its settings, sessions, upstream services and live streams."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.gateway.adapters.upstream import Upstreams
from services.gateway.service.live import LiveHub
from services.gateway.service.sessions import Sessions

__all__ = ["GatewayContext", "WebConfig"]


@dataclass(frozen=True, slots=True)
class WebConfig:
    """The browser-facing choices: cookie security, the public origin, the console, the body limit."""

    secure_cookies: bool
    public_origin: str
    console_dir: Path
    max_request_bytes: int


@dataclass(frozen=True, slots=True)
class GatewayContext:
    """Built once by the composition root, read by every route through ``app.state.gateway``."""

    web: WebConfig
    sessions: Sessions
    upstreams: Upstreams
    live: LiveHub
