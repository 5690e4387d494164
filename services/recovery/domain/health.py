"""The health check after a reset or reboot: only readings the node agent took after the action count.

A GPU passes when its latest reading taken after the action shows it present and answering. A reading
from before the action says nothing about whether the action worked, and a GPU the agent still reports
lost (fallen off the bus) has not come back: the check then fails, and the incident waits in verifying
for a good reading until its deadline escalates it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

__all__ = ["GpuReading", "HealthCheck", "HealthVerdict", "judge_health"]


class GpuReading(BaseModel):
    """One sample of one GPU as the node agent reported it: when, and whether the GPU answered."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str
    at: AwareDatetime = Field(description="When the agent took the reading (the sample batch's time)")
    answering: bool = Field(description="False when the agent reported the GPU lost")


class HealthVerdict(StrEnum):
    """How a GPU (or a node's GPUs) stands after the action."""

    PASSED = "passed"
    LOST = "lost"  # the latest reading after the action says the GPU does not answer
    NO_READING = "no_reading"  # nothing read since the action


class HealthCheck(BaseModel):
    """The verdict, and in words which GPU keeps it from passing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: HealthVerdict
    detail: str = ""

    @property
    def passed(self) -> bool:
        """Whether every GPU answered after the action."""
        return self.verdict is HealthVerdict.PASSED


def _latest_after(readings: Sequence[GpuReading], after: AwareDatetime) -> GpuReading | None:
    fresh = [r for r in readings if r.at > after]
    return max(fresh, key=lambda r: r.at) if fresh else None


def judge_health(
    *, gpus: Sequence[str], readings: Mapping[str, Sequence[GpuReading]], after: AwareDatetime
) -> HealthCheck:
    """Whether every GPU in ``gpus`` answered in its latest reading taken after ``after`` (the action).

    A lost GPU outweighs one not read yet: it is the stronger evidence that the action did not work.
    No GPU to check (a node nothing was read from) is no reading, never a pass.
    """
    if not gpus:
        return HealthCheck(
            verdict=HealthVerdict.NO_READING, detail="no GPU of the node reported since the reset or reboot"
        )
    unread: list[str] = []
    for gpu in sorted(set(gpus)):
        latest = _latest_after(readings.get(gpu, ()), after)
        if latest is None:
            unread.append(gpu)
        elif not latest.answering:
            return HealthCheck(
                verdict=HealthVerdict.LOST, detail=f"GPU {gpu} still reported lost after the reset or reboot"
            )
    if unread:
        return HealthCheck(
            verdict=HealthVerdict.NO_READING,
            detail=f"no reading of GPU {', '.join(unread)} since the reset or reboot",
        )
    return HealthCheck(verdict=HealthVerdict.PASSED)
