"""python -m services.telemetry: run the telemetry service."""

from libs.common.serve import serve
from services.telemetry.app import create_app
from services.telemetry.settings import TelemetrySettings

if __name__ == "__main__":
    settings = TelemetrySettings()
    serve(create_app(settings), settings)
