"""Inventory's Postgres store and read queries, and its YAML loaders (GPU catalog, fleet files)."""
