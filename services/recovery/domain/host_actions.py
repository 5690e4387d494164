"""What a node agent reported of a reset or reboot recovery asked for: the evidence kept on the incident."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

__all__ = ["HostAction", "HostActionResult", "command_id"]

#: The device actions recovery asks a node agent for.
HostAction = Literal["reset_gpu", "reboot_node"]


def command_id(*, incident_id: str, action: HostAction, step: int) -> str:
    """The id of a reset or reboot: the incident's, the action and the history entry that asked for it."""
    return f"{incident_id}:{action}:{step}"


class HostActionResult(BaseModel):
    """One reset or reboot as the host carried it out (or refused it), with its commands and output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command_id: str = Field(description="The request's id (see command_id)")
    action: str = Field(description="reset_gpu or reboot_node, as the agent named it")
    outcome: Literal["succeeded", "failed", "refused"]
    node: str
    gpu: str | None = Field(default=None, description="The GPU reset; None for a node reboot")
    reason: str = Field(default="", description="Why it failed or was refused, as the agent said")
    commands: tuple[tuple[str, ...], ...] = Field(default=(), description="Every command run, as argv")
    exit_code: int | None = Field(default=None, description="Exit status of the last command run")
    output: str = Field(default="", description="What the commands printed")
    at: AwareDatetime = Field(description="When it finished on the host (or when recovery heard of it)")

    @property
    def ok(self) -> bool:
        """Whether the host carried the action out."""
        return self.outcome == "succeeded"

    def describe(self) -> str:
        """One line for people: the action, where, how it ended, its exit status and first output line."""
        target = f"GPU {self.gpu} on node {self.node}" if self.gpu else f"node {self.node}"
        status = "no exit status" if self.exit_code is None else f"exit status {self.exit_code}"
        first = next((line.strip() for line in self.output.splitlines() if line.strip()), "")
        text = f"{self.action} of {target} {self.outcome} ({status})"
        if self.reason:
            text += f": {self.reason}"
        return text + (f"; output: {first}" if first else "; no output")
