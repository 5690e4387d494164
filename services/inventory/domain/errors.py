"""Domain errors of the inventory core; the API layer maps each family to one HTTP status."""

from __future__ import annotations

__all__ = [
    "AllocationConflictError",
    "FleetFileError",
    "ForbiddenTransitionError",
    "InvalidMigLayoutError",
    "InventoryError",
    "MigNotSupportedError",
    "ReconfigurationConflictError",
    "TimeSliceRefusedError",
    "UnknownGpuError",
    "UnknownModelError",
]


class InventoryError(Exception):
    """Base of every inventory domain error; `code` is a stable machine-readable name."""

    code = "inventory_error"


class UnknownModelError(InventoryError, LookupError):
    """The GPU model is not in the catalog (maps to 404/422)."""

    code = "unknown_model"

    def __init__(self, *, model: str, known: tuple[str, ...]) -> None:
        super().__init__(f"unknown GPU model {model!r}; known models: {', '.join(known)}")
        self.model = model
        self.known = known


class UnknownGpuError(InventoryError, LookupError):
    """No GPU with this uuid is registered."""

    code = "unknown_gpu"


class MigNotSupportedError(InventoryError):
    """The model has no MIG profiles (maps to 422)."""

    code = "mig_not_supported"


class InvalidMigLayoutError(InventoryError):
    """A MIG layout breaks the model's geometry; `problems` says which rule, for which profile."""

    code = "invalid_mig_layout"

    def __init__(self, *, model: str, problems: tuple[str, ...]) -> None:
        super().__init__(f"invalid MIG layout for {model}: " + "; ".join(problems))
        self.model = model
        self.problems = problems


class TimeSliceRefusedError(InventoryError):
    """A time-slicing ratio is out of range or too high for the workload kind (maps to 422)."""

    code = "time_slice_refused"


class ForbiddenTransitionError(InventoryError):
    """A health or node-status action is not allowed from the current state (maps to 409)."""

    code = "forbidden_transition"


class ReconfigurationConflictError(InventoryError):
    """A GPU cannot be repartitioned while allocations hold it (maps to 409)."""

    code = "reconfiguration_conflict"


class AllocationConflictError(InventoryError):
    """One allocation id arrived twice with different content (maps to 409, never silently merged)."""

    code = "allocation_conflict"


class FleetFileError(InventoryError):
    """A fleet file is not valid YAML or breaks the fleet schema (maps to 422)."""

    code = "fleet_file_invalid"
