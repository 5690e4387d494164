"""GPU model names at submission: an alias asks for its canonical model, an unknown name is refused.

GPUs register under the catalog's canonical names (inventory resolves what NVML reports), so a request
naming ``H100-80GB`` or ``NVIDIA A100 80GB PCIe`` must ask for ``H100-80GB-SXM`` or ``A100-80GB``, or it
waits for a model no GPU ever has. A name that is neither in the catalog nor on a GPU of the fleet (a
site's own naming) can never be placed: the submission is refused, naming the models it could ask for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from services.scheduler.domain.creation import CreationSpec
from services.scheduler.domain.errors import ValidationError
from services.scheduler.domain.model import GpuRequest, MigRequest

__all__ = ["GpuModels", "requested_model"]


def requested_model(spec: CreationSpec) -> str | None:
    """The GPU model a request names, if it names one."""
    r = spec.resources
    return r.model if isinstance(r, GpuRequest | MigRequest) else None


@dataclass(frozen=True, slots=True)
class GpuModels:
    """The catalog's names: each canonical name and alias, case-folded, to its canonical name."""

    names: Mapping[str, str]

    def canonical(self, name: str) -> str | None:
        """The catalog's name for ``name`` (itself, an alias, any case); None when the catalog lacks it."""
        return self.names.get(name.casefold())

    def resolve(self, spec: CreationSpec, *, in_fleet: Iterable[str] = ()) -> CreationSpec:
        """``spec`` asking for the canonical model; a name only the fleet knows (``in_fleet``: the models
        of the fleet's GPUs, needed only when the catalog lacks the name) is kept as it is.

        Raises ValidationError (``resources.model``) for a name neither the catalog nor the fleet knows.
        """
        asked = requested_model(spec)
        if asked is None:
            return spec
        found = self.canonical(asked)
        if found is None:
            fleet = set(in_fleet)
            if asked in fleet:
                return spec
            known = sorted(set(self.names.values()) | fleet)
            raise ValidationError(
                field="resources.model",
                message=f"unknown GPU model {asked!r}: not in the catalog and no GPU of the fleet has it; "
                f"one of {', '.join(known)}",
            )
        if found == asked:
            return spec
        resources = spec.resources.model_copy(update={"model": found})
        return spec.model_copy(update={"resources": resources})
