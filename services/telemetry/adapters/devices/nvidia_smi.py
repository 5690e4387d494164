"""Device actions by nvidia-smi: GPU reset, MIG layouts, and a configured node reboot command.

MIG layouts are applied as NVIDIA's MIG user guide does it: destroy the compute instances (-dci), then
the GPU instances (-dgi), then create the new GPU instances with their default compute instances
(-cgi <profile ids> -C); the profile ids come from the GPU's own listing (-lgip). MIG mode itself is never
toggled here (that may need a GPU reset or a reboot).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
from collections.abc import Sequence

from services.telemetry.domain.devices import (
    DeviceResult,
    MigInstance,
    MigListing,
    MigProfile,
    creation_order,
    cut_output,
    layout_problem,
)

__all__ = ["NvidiaSmiActions", "parse_gpu_instances", "parse_profiles"]

DEFAULT_TIMEOUT_S = 120.0  # a GPU reset waits for the driver to tear down and bring up the device
KILL_WAIT_S = 5.0  # a killed command stuck in the driver (D state) is left behind after this long
#: | 0  MIG 1g.10gb   19   7/7   9.50   No   14   0   0 |
_PROFILE_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)")
#: | 0  MIG 1g.10gb   19   9   2:1 |
_INSTANCE_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)")
#: What -lgi/-dci/-dgi print on a GPU with nothing to destroy (a fresh MIG GPU): not a failure. Only
#: this message: any other failure ("GPU not found", "Insufficient Permissions") stays one.
_NOTHING_TO_DESTROY = re.compile(r"\bno (gpu|compute) instances? (were )?found\b", re.IGNORECASE)


def parse_profiles(text: str) -> tuple[MigProfile, ...]:
    """The profiles of `nvidia-smi mig -lgip` (each profile's first row; the second row holds engines)."""
    rows = (_PROFILE_ROW.match(line.strip()) for line in text.splitlines())
    return tuple(
        MigProfile(
            name=m.group(2),
            profile_id=int(m.group(3)),
            free=int(m.group(4)),
            total=int(m.group(5)),
            memory_gib=float(m.group(6)),
        )
        for m in rows
        if m is not None
    )


def parse_gpu_instances(text: str) -> tuple[MigInstance, ...]:
    """The GPU instances of `nvidia-smi mig -lgi`: profile, instance id and placement start slot."""
    rows = (_INSTANCE_ROW.match(line.strip()) for line in text.splitlines())
    return tuple(
        MigInstance(profile=m.group(2), gpu_instance_id=int(m.group(4)), slot=int(m.group(5)))
        for m in rows
        if m is not None
    )


class NvidiaSmiActions:
    """DeviceActions by running nvidia-smi (and the configured reboot command) on this host."""

    def __init__(
        self,
        *,
        nvidia_smi: Sequence[str] = ("nvidia-smi",),
        reboot_command: Sequence[str] = (),
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if not nvidia_smi:
            raise ValueError("the nvidia-smi command is empty")
        self._smi = tuple(nvidia_smi)
        self._reboot = tuple(reboot_command)
        self._timeout_s = timeout_s

    async def mig_profiles(self, *, gpu_uuid: str) -> MigListing:
        result = await self._run((*self._smi, "mig", "-lgip", "-i", gpu_uuid))
        return MigListing(result=result, profiles=parse_profiles(result.output) if result.ok else ())

    async def mig_instances(self, *, gpu_uuid: str) -> MigListing:
        result = await self._run((*self._smi, "mig", "-lgi", "-i", gpu_uuid))
        if not result.ok and _NOTHING_TO_DESTROY.search(result.output):
            return MigListing(result=_succeeded(result))  # MIG on, no instances yet
        return MigListing(result=result, instances=parse_gpu_instances(result.output) if result.ok else ())

    async def apply_mig(self, *, gpu_uuid: str, profiles: Sequence[str]) -> DeviceResult:
        listing = await self.mig_profiles(gpu_uuid=gpu_uuid)
        if not listing.result.ok:
            return listing.result
        problem = layout_problem(listing.profiles, profiles)
        if problem is not None:
            return DeviceResult.refused(problem)
        ids = {p.name: p.profile_id for p in listing.profiles}
        steps: list[tuple[str, ...]] = [
            (*self._smi, "mig", "-i", gpu_uuid, "-dci"),
            (*self._smi, "mig", "-i", gpu_uuid, "-dgi"),
        ]
        if profiles:
            created = ",".join(str(ids[p]) for p in creation_order(listing.profiles, profiles))
            steps.append((*self._smi, "mig", "-i", gpu_uuid, "-cgi", created, "-C"))
        return await self._run_all(steps, may_find_nothing=2)

    async def reset_gpu(self, *, gpu_uuid: str) -> DeviceResult:
        return await self._run((*self._smi, "--gpu-reset", "-i", gpu_uuid))

    async def reboot_node(self, *, node: str) -> DeviceResult:
        if not self._reboot:
            return DeviceResult.refused("node reboot not configured (TELEMETRY_AGENT_REBOOT_COMMAND)")
        return await self._run(self._reboot)

    async def _run_all(self, steps: Sequence[tuple[str, ...]], *, may_find_nothing: int) -> DeviceResult:
        """Run the commands in order, stopping at the first that fails; the first `may_find_nothing`
        succeed too when they found nothing to destroy."""
        done: list[tuple[str, ...]] = []
        outputs: list[str] = []
        result = DeviceResult(outcome="succeeded")
        for n, argv in enumerate(steps):
            result = await self._run(argv)
            done.append(argv)
            outputs.append(result.output)
            if not result.ok and n < may_find_nothing and _NOTHING_TO_DESTROY.search(result.output):
                result = _succeeded(result)
            if not result.ok:
                break
        return DeviceResult(
            outcome=result.outcome,
            reason=result.reason,
            commands=tuple(done),
            exit_code=result.exit_code,
            output=cut_output("".join(outputs)),
        )

    async def _run(self, argv: Sequence[str]) -> DeviceResult:
        """One command, within the timeout; its stdout then stderr, cut to OUTPUT_LIMIT."""
        command = (tuple(argv),)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            return DeviceResult(outcome="failed", reason=f"cannot start {argv[0]}: {exc}", commands=command)
        try:
            async with asyncio.timeout(self._timeout_s):
                out, err = await proc.communicate()
        except TimeoutError:
            reason = f"{shlex.join(argv)} did not finish within {self._timeout_s:g}s"
            if not await _killed(proc):
                reason += f" and was still there {KILL_WAIT_S:g}s after it was killed"
            return DeviceResult(outcome="failed", reason=reason, commands=command)
        code = proc.returncode
        output = cut_output(out.decode(errors="replace") + err.decode(errors="replace"))
        if code == 0:
            return DeviceResult(outcome="succeeded", commands=command, exit_code=0, output=output)
        reason = f"{shlex.join(argv)} exited {code}: {_last_line(output)}"
        return DeviceResult(outcome="failed", reason=reason, commands=command, exit_code=code, output=output)


async def _killed(proc: asyncio.subprocess.Process) -> bool:
    """Kill a command and wait KILL_WAIT_S for it to go; False when it did not (stuck in the driver)."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    try:
        async with asyncio.timeout(KILL_WAIT_S):
            await proc.wait()
    except TimeoutError:
        return False
    return True


def _succeeded(result: DeviceResult) -> DeviceResult:
    return DeviceResult(
        outcome="succeeded", commands=result.commands, exit_code=result.exit_code, output=result.output
    )


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
