"""python -m services.gateway: run the gateway (the console, sessions, the API proxy, live streams)."""

import os

import uvicorn

from libs.common.observability import setup_logging, setup_tracing
from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings

if __name__ == "__main__":
    settings = GatewaySettings()
    setup_logging(service=settings.service_name, level=settings.log_level, json_lines=settings.log_json)
    setup_tracing(service_name=settings.service_name, environ=os.environ)
    uvicorn.run(
        create_app(settings),
        host=settings.http_host,
        port=settings.http_port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
