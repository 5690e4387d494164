"""python -m services.recovery: run the recovery service."""

from libs.common.serve import serve
from services.recovery.app import create_app
from services.recovery.settings import RecoverySettings

if __name__ == "__main__":
    settings = RecoverySettings()
    serve(create_app(settings), settings)
