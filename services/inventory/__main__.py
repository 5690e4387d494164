"""python -m services.inventory: run the inventory service."""

from libs.common.serve import serve
from services.inventory.app import create_app
from services.inventory.settings import InventorySettings

if __name__ == "__main__":
    settings = InventorySettings()
    serve(create_app(settings), settings)
