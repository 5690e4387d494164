"""python -m services.billing: run the billing service."""

from libs.common.serve import serve
from services.billing.app import create_app
from services.billing.settings import BillingSettings

if __name__ == "__main__":
    settings = BillingSettings()
    serve(create_app(settings), settings)
