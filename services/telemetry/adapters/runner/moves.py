"""Moving a checkpoint through the object store: the source uploads it, the target downloads it.

The agent loop drives it (``step``, every tick); the transfers run as tasks on the agent's event loop,
never in the runner's synchronous poll. The process runner hands it work and takes back what it gives:

- ``leave``: a run stopped for a move with a checkpoint asked. Once its supervisor wrote exit.json (with
  the checkpoint's result), the files of its ``checkpoints/`` (regular files, the COMPLETE marker left
  out) go to ``keys.checkpoint_file(wl, pl, path)``, then ``keys.checkpoint_manifest`` LAST; a workload
  that could not checkpoint gets a manifest with ``complete: false`` and why, so its target need not
  wait. ``moved.json`` in the run directory then says it is done: never uploaded twice, even after the
  agent restarts.
- ``restore``: the target placement of such a move. It waits up to ``wait_s`` for the source's manifest,
  downloads the files into ``<target run dir>/restore/`` and gives the runner that directory (it becomes
  ``GPUCLOUD_RESTORE_FROM``), or None with the reason to start from the start.

Progress comes back as runner reports: checkpoint, transfer (bytes uploaded) and restore (bytes
downloaded), with an overall percent that never falls (``overall``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from libs.common.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError, keys
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.checkpointing import COMPLETE
from services.telemetry.adapters.runner.report import RunnerReport

__all__ = ["MOVED", "RESTARTED", "RESTORE_DIR", "Mover", "Restored", "overall"]

log = logging.getLogger(__name__)
MOVED = "moved.json"  # in a source run directory: its checkpoint's manifest is in the store
RESTORE_DIR = "restore"  # in a target run directory: the checkpoint it starts from
RESTARTED = "restarted from the start"
RETRY_S = 5.0  # after a store error, the source's upload is tried again this much later
Phase = Literal["checkpoint", "transfer", "restore"]
#: Where each phase sits in the overall percent (recovery's progress bar never goes back).
_BANDS: dict[Phase, tuple[float, float]] = {
    "checkpoint": (0.0, 10.0),
    "transfer": (10.0, 50.0),
    "restore": (50.0, 95.0),
}


def overall(phase: Phase, *, done: int, total: int) -> float:
    """The overall percent of a phase having moved ``done`` of ``total`` bytes (all of none is done)."""
    low, high = _BANDS[phase]
    return low + (high - low) * (done / total if total else 1.0)


@dataclass(frozen=True, slots=True)
class Restored:
    """A target placement ready to launch: from ``path`` (GPUCLOUD_RESTORE_FROM), or from the start."""

    workload_id: str
    placement_id: str
    path: Path | None
    note: str


@dataclass(slots=True)
class _Job:
    path: Path
    workload_id: str
    placement_id: str
    source: str = ""  # a restore's source placement
    task: asyncio.Task[None] | None = None
    not_before: float = 0.0
    warned: bool = False
    said: set[str] = field(default_factory=set)


class Mover:
    """Uploads the checkpoints of runs that leave, and downloads those of runs that arrive."""

    def __init__(
        self,
        *,
        store: ObjectStore,
        wait_s: float = 120.0,
        poll_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.wait_s = wait_s
        self._poll_s = poll_s
        self._clock = clock
        self._leaving: dict[Path, _Job] = {}
        self._arriving: dict[tuple[str, str], _Job] = {}
        self._reports: list[RunnerReport] = []
        self._restored: list[Restored] = []

    # -- what the runner hands over and takes back (synchronous)

    def leave(self, *, path: Path, workload_id: str, placement_id: str) -> None:
        """Upload this run's checkpoint once its supervisor has ended it (unless done before)."""
        if path not in self._leaving and not (path / MOVED).exists():
            self._leaving[path] = _Job(path, workload_id, placement_id)

    def restore(self, *, path: Path, workload_id: str, placement_id: str, source_placement_id: str) -> None:
        """Fetch the checkpoint ``source_placement_id`` left into ``path``/restore, then hand it back."""
        self._arriving.setdefault(
            (workload_id, placement_id), _Job(path, workload_id, placement_id, source=source_placement_id)
        )

    def cancel(self, *, workload_id: str, placement_id: str) -> None:
        """The target placement ended before it launched: stop waiting for its checkpoint."""
        job = self._arriving.pop((workload_id, placement_id), None)
        if job is not None and job.task is not None:
            job.task.cancel()

    def take_reports(self) -> list[RunnerReport]:
        """Progress since the last call."""
        out, self._reports = self._reports, []
        return out

    def take_restored(self) -> list[Restored]:
        """Targets ready to launch since the last call."""
        out, self._restored = self._restored, []
        return out

    @property
    def busy(self) -> int:
        """Transfers not finished yet."""
        return len(self._leaving) + len(self._arriving)

    # -- the agent loop

    async def step(self) -> None:
        """Start a task for each job without one; forget those done (call it from the agent loop)."""
        now = self._clock()
        for job in [*self._leaving.values(), *self._arriving.values()]:
            if job.task is None and now >= job.not_before:
                run = self._leave(job) if not job.source else self._restore(job)
                job.task = asyncio.create_task(run, name=f"move {job.workload_id} {job.placement_id}")
            elif job.task is not None and job.task.done():
                self._reap(job)

    def _reap(self, job: _Job) -> None:
        assert job.task is not None
        failed = None if job.task.cancelled() else job.task.exception()
        job.task = None
        if failed is None:
            return
        log.error("moving %s placement %s failed: %r", job.workload_id, job.placement_id, failed)
        job.not_before = self._clock() + RETRY_S

    async def close(self) -> None:
        """Cancel the transfers under way (the next start takes them up again from the run directories)."""
        tasks = [j.task for j in [*self._leaving.values(), *self._arriving.values()] if j.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the source side

    async def _leave(self, job: _Job) -> None:
        self._report(job, "checkpoint", done=0, total=0, percent=0.0, once="asked")
        # The supervisor is another process: its exit.json is looked for, as the runner's poll does.
        while (ended := files.read_json(job.path / files.EXIT)) is None:  # noqa: ASYNC110
            await asyncio.sleep(self._poll_s)
        result = ended.get("checkpoint")
        if not isinstance(result, dict):
            why = "the workload had ended (or its supervisor died) before it could be asked to checkpoint"
            result = {"complete": False, "why": why}
        try:
            manifest = await self._upload(job, result)
        except ObjectStoreError as exc:
            if not job.warned:
                log.warning(
                    "checkpoint of %s placement %s not uploaded yet: %s",
                    job.workload_id,
                    job.placement_id,
                    exc,
                )
                job.warned = True
            job.not_before = self._clock() + RETRY_S
            return
        files.write_json(job.path / MOVED, {"manifest": manifest, "at": _now()})
        self._leaving.pop(job.path, None)

    async def _upload(self, job: _Job, result: dict[str, Any]) -> dict[str, Any]:
        """The checkpoint's files, then its manifest (last: a manifest means whole); the manifest."""
        wl, pl = job.workload_id, job.placement_id
        doc: dict[str, Any] = {"workload_id": wl, "placement_id": pl, "files": [], "total_bytes": 0}
        if not result.get("complete"):
            why = str(result.get("why") or "it did not checkpoint")
            self._report(
                job, "checkpoint", done=0, total=0, percent=10.0, note=f"no checkpoint: {why}", last=True
            )
            return await self._manifest(job, doc | {"complete": False, "why": why})
        found = _files_of(job.path / files.CHECKPOINT_DIR)
        total = sum(size for _, size in found)
        self._report(job, "checkpoint", done=0, total=0, percent=10.0, once="done")
        done = 0
        self._report(job, "transfer", done=0, total=total, last=not found)
        for i, (rel, size) in enumerate(found, start=1):
            try:
                key = keys.checkpoint_file(wl, pl, rel)
            except ValueError as exc:  # a file name no object key can hold: the checkpoint is not whole
                why = f"its checkpoint file {rel!r} cannot be stored: {exc}"
                self._report(job, "transfer", done=done, total=total, note=f"no checkpoint: {why}", last=True)
                return await self._manifest(job, doc | {"complete": False, "why": why})
            await self.store.put_file(key, job.path / files.CHECKPOINT_DIR / rel)
            done += size
            self._report(job, "transfer", done=done, total=total, last=i == len(found))
        files_doc = [{"path": rel, "size": size} for rel, size in found]
        return await self._manifest(
            job, doc | {"files": files_doc, "total_bytes": total, "complete": True, "why": ""}
        )

    async def _manifest(self, job: _Job, doc: dict[str, Any]) -> dict[str, Any]:
        doc = doc | {"at": _now()}
        key = keys.checkpoint_manifest(job.workload_id, job.placement_id)
        await self.store.put(key, json.dumps(doc).encode())
        return doc

    # -- the target side

    async def _restore(self, job: _Job) -> None:
        manifest = await self._wait_for_manifest(job)
        if manifest is None:
            self._ready(job, None, f"{RESTARTED}: no checkpoint of {job.source} came within {self.wait_s:g}s")
        elif not manifest.get("complete"):
            why = str(manifest.get("why") or "it did not checkpoint")
            self._ready(job, None, f"{RESTARTED}: {job.source} could not checkpoint: {why}")
        else:
            await self._download(job, manifest)

    async def _wait_for_manifest(self, job: _Job) -> dict[str, Any] | None:
        key = keys.checkpoint_manifest(job.workload_id, job.source)
        until = self._clock() + self.wait_s
        while True:
            try:
                doc = json.loads(await self.store.get(key))
                return (
                    doc if isinstance(doc, dict) else {"complete": False, "why": "its manifest is no object"}
                )
            except ObjectNotFound:
                pass
            except (ObjectStoreError, ValueError) as exc:
                if not job.warned:
                    log.warning("checkpoint manifest %s not readable yet: %s", key, exc)
                    job.warned = True
            if self._clock() >= until:
                return None
            await asyncio.sleep(min(self._poll_s, max(until - self._clock(), 0.0)))

    async def _download(self, job: _Job, manifest: dict[str, Any]) -> None:
        into = job.path / RESTORE_DIR
        shutil.rmtree(into, ignore_errors=True)  # an earlier try's part
        listed = [(str(f["path"]), int(f["size"])) for f in manifest.get("files", []) if isinstance(f, dict)]
        total, done = sum(size for _, size in listed), 0
        self._report(job, "restore", done=0, total=total)
        try:
            for rel, size in listed:
                target = (into / rel).resolve()
                if not target.is_relative_to(into.resolve()):
                    raise ValueError(f"file path {rel!r} leaves the restore directory")
                got = await self.store.download(
                    keys.checkpoint_file(job.workload_id, job.source, rel), target
                )
                if got != size:
                    raise ValueError(f"{rel}: {got} bytes where the manifest says {size}")
                done += size
                self._report(job, "restore", done=done, total=total)
        except (ObjectStoreError, ValueError, OSError) as exc:
            shutil.rmtree(into, ignore_errors=True)
            self._ready(job, None, f"{RESTARTED}: the checkpoint of {job.source} could not be fetched: {exc}")
            return
        into.mkdir(parents=True, exist_ok=True)
        said = f"restored from the checkpoint of {job.source} ({len(listed)} file(s), {total} bytes)"
        self._ready(job, into, said)

    def _ready(self, job: _Job, path: Path | None, note: str) -> None:
        if self._arriving.pop((job.workload_id, job.placement_id), None) is not None:
            self._restored.append(Restored(job.workload_id, job.placement_id, path, note))

    def _report(
        self,
        job: _Job,
        phase: Phase,
        *,
        done: int,
        total: int,
        percent: float | None = None,
        note: str = "",
        once: str = "",
        last: bool = False,
    ) -> None:
        if once:
            if once in job.said:
                return
            job.said.add(once)
        self._reports.append(
            RunnerReport(
                workload_id=job.workload_id,
                event="progress",
                at=datetime.now(UTC),
                phase=phase,
                percent=overall(phase, done=done, total=total) if percent is None else percent,
                reason=note,
                placement_id=job.placement_id,
                runner="process",
                bytes_done=done if phase != "checkpoint" else None,
                bytes_total=total if phase != "checkpoint" else None,
                last=last,
            )
        )


def _files_of(directory: Path) -> list[tuple[str, int]]:
    """The regular files under a checkpoint directory (symlinks not followed; the marker left out)."""
    found = []
    for path in sorted(directory.rglob("*")) if directory.is_dir() else []:
        if path.is_symlink() or not path.is_file():
            continue
        rel = path.relative_to(directory).as_posix()
        if rel != COMPLETE:
            found.append((rel, path.stat().st_size))
    return found


def _now() -> str:
    return datetime.now(UTC).isoformat()
