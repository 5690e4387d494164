"""Pure billing rules and models: prices, rating, the ledger, budgets, tags, idle, spot, reconciliation."""
