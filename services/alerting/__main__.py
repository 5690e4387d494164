"""python -m services.alerting: run the alerting service."""

from libs.common.serve import serve
from services.alerting.app import create_app
from services.alerting.settings import AlertingSettings

if __name__ == "__main__":
    settings = AlertingSettings()
    serve(create_app(settings), settings)
