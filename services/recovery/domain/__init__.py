"""Pure rules and models of recovery: stdlib, pydantic and this package only."""
