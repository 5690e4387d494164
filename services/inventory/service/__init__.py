"""Use cases of inventory: registration, repartitioning, health changes and the event handlers."""
