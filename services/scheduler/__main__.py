"""python -m services.scheduler: run the scheduler service."""

from libs.common.serve import serve
from services.scheduler.app import create_app
from services.scheduler.settings import SchedulerSettings

if __name__ == "__main__":
    settings = SchedulerSettings()
    serve(create_app(settings), settings)
