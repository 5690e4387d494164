"""The pure core of inventory: GPU models, MIG geometry, units, health, partitions and capacity."""
