"""The base of every event payload: frozen, versioned, tolerant of fields it does not know."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

__all__ = ["Event"]


class Event(BaseModel):
    """A fact that happened, as carried in an envelope's ``data``.

    Subclasses are named in the past tense with the version in the name (``GpuDrainedV1``) and pin
    their ``type`` with a ``Literal`` of the form ``<family>.<aggregate>.<what>.v<N>``. An additive
    change keeps the version; a breaking change is a new class with the next version.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: str
    #: The logical topic this event travels on; set by the family module's registration.
    topic: ClassVar[str] = ""

    @classmethod
    def event_type(cls) -> str:
        """The versioned CloudEvents ``type`` of this payload class."""
        default = cls.model_fields["type"].default
        if not isinstance(default, str):
            raise TypeError(f"{cls.__name__}.type must default to its literal event type")
        return default

    def subject(self) -> str:
        """The aggregate id this event is about: the Kafka key, so order holds per aggregate."""
        raise NotImplementedError(f"{type(self).__name__} must say which aggregate it is about")
