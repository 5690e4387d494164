"""The request guard lets through every fleet file the fleet route accepts, and only on that path."""

from __future__ import annotations

from services.inventory.adapters.fleet_yaml import FLEET_LIMITS
from services.inventory.settings import InventorySettings
from services.scheduler.settings import SchedulerSettings


def test_the_fleet_path_holds_the_largest_fleet_file_and_every_other_path_keeps_the_small_limit() -> None:
    assert InventorySettings().max_fleet_request_bytes >= FLEET_LIMITS.max_bytes
    assert InventorySettings().max_request_bytes == 1024 * 1024
    assert SchedulerSettings().max_request_bytes == 1024 * 1024
