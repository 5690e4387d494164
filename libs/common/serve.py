"""Run a service's app under uvicorn with JSON logs and tracing set up."""

from __future__ import annotations

import os

import uvicorn
from fastapi import FastAPI

from libs.common.observability import setup_logging, setup_tracing
from libs.common.settings import BaseServiceSettings

__all__ = ["serve"]


def serve(app: FastAPI, settings: BaseServiceSettings) -> None:
    """Serve ``app`` on the settings' host and port until SIGINT/SIGTERM; spans go where the
    OpenTelemetry variables say (``libs.common.observability.export``)."""
    setup_logging(service=settings.service_name, level=settings.log_level, json_lines=settings.log_json)
    setup_tracing(service_name=settings.service_name, environ=os.environ)
    uvicorn.run(
        app,
        host=settings.http_host,
        port=settings.http_port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=10,
    )
