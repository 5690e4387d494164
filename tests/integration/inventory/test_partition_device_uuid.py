"""A MIG partition's device UUID is kept with the partition in inventory's tables."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.inventory.adapters.catalog_yaml import load_catalog
from services.inventory.adapters.unit_of_work import PostgresInventoryUnitOfWork
from services.inventory.domain.mig import MigRequest
from services.inventory.domain.records import DiscoveredGpu, NodeDiscovery, NodeLabels
from services.inventory.domain.registry import apply_discovery
from tests.integration.store_contract import service_pool
from tests.integration.support import Isolation

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)


async def test_discovered_mig_device_uuids_are_saved_and_loaded_with_their_partitions(
    isolation: Isolation,
) -> None:
    found = DiscoveredGpu(
        uuid="GPU-1",
        index=0,
        model="A100-80GB",
        pci_bus_id="0000:01:00.0",
        mig_enabled=True,
        mig_instances=(MigRequest(profile="3g.40gb", start=0), MigRequest(profile="3g.40gb", start=4)),
        mig_device_uuids=("MIG-a", None),
    )
    labels = NodeLabels(zone="z1", region="r1", pool="p1")
    discovery = NodeDiscovery(hostname="h1", labels=labels, gpus=(found,))
    result = apply_discovery(current=None, discovery=discovery, catalog=load_catalog(), at=T0)
    async with service_pool(isolation, "inventory") as pool:
        async with PostgresInventoryUnitOfWork(pool=pool, source="test") as uow:
            await uow.nodes.save_nodes(nodes=[result.inventory.node], at=T0)
            await uow.nodes.save_gpus(gpus=result.inventory.gpus, at=T0)
            await uow.commit()
        async with PostgresInventoryUnitOfWork(pool=pool, source="test") as uow:
            loaded = await uow.nodes.load_nodes(hostnames=["h1"])

    (gpu,) = loaded["h1"].gpus
    assert [(p.id, p.device_uuid) for p in gpu.partitions] == [
        ("GPU-1/mig/3g.40gb@0", "MIG-a"),
        ("GPU-1/mig/3g.40gb@4", None),
    ]
    assert gpu == result.inventory.gpus[0]
