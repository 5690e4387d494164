"""The request guard lets through every fleet file the fleet route accepts."""

from __future__ import annotations

from services.inventory.adapters.fleet_yaml import FLEET_LIMITS
from services.inventory.settings import InventorySettings
from services.scheduler.settings import SchedulerSettings


def test_inventorys_body_limit_holds_the_largest_fleet_file_and_other_services_keep_the_small_one() -> None:
    assert InventorySettings().max_request_bytes >= FLEET_LIMITS.max_bytes
    assert SchedulerSettings().max_request_bytes == 1024 * 1024
