"""The shipper: each run's output log and outputs leave the host for the object store (keys.py's layout).

Every round (each agent tick) it ships the new bytes of every run's output as log chunks, at most
``chunk_bytes`` each. Once the run has exited (exit.json) it ships the last bytes, writes the log's
end.json, uploads the files under outputs/ (regular files only, up to ``output_cap_bytes`` together),
writes the outputs manifest last, and marks the run finalized in shipped.json. The process runner holds
a run's exit report back until then (or ``give_up_s``), so whoever sees the exit finds the outputs.

shipped.json records a chunk (seq, read time, byte range) before it is put and again once it is, so an
agent killed between the two puts the same bytes under the same key after its restart: no chunk is put
under a second key, and no byte is skipped unless the supervisor's quota rotated it away before it was
read (it is then counted in the log end's ``dropped_bytes``, never invented). shipfiles.py reads the host.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from libs.common.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError, keys
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.shipfiles import collect_outputs, read_next, read_range, shown

__all__ = ["SHIPPED", "Shipper", "is_finalized"]

log = logging.getLogger(__name__)
SHIPPED = "shipped.json"  # in the run directory: what of its log and outputs is in the store


def is_finalized(run_dir: Path) -> bool:
    """The run's last log bytes, log end, outputs and outputs manifest are all in the store."""
    return bool((files.read_json(run_dir / SHIPPED) or {}).get("finalized"))


@dataclass(slots=True)
class _Shipped:
    """shipped.json: the next chunk's seq; the output up to ``offset`` is shipped or counted dropped."""

    seq: int = 0
    offset: int = 0
    shipped: int = 0
    dropped: int = 0
    pending: dict[str, int] | None = None  # the chunk being put: seq, unix_ms, start, end
    log_ended: bool = False
    finalized: bool = False

    @classmethod
    def load(cls, run_dir: Path) -> _Shipped:
        doc = files.read_json(run_dir / SHIPPED) or {}
        return cls(**{k: doc[k] for k in cls.__dataclass_fields__ if k in doc})

    def save(self, run_dir: Path) -> None:
        files.write_json(run_dir / SHIPPED, asdict(self))

    def commit(self) -> None:
        assert self.pending is not None
        self.seq += 1
        self.shipped += self.pending["end"] - self.pending["start"]
        self.offset = self.pending["end"]
        self.pending = None


@dataclass(frozen=True, slots=True)
class _Run:
    path: Path
    workload_id: str
    placement_id: str


class Shipper:
    """Ships the runs under ``root`` to ``store``; call ship() every tick (more often is fine)."""

    def __init__(
        self,
        *,
        store: ObjectStore,
        root: Path,
        chunk_bytes: int = 1 << 20,
        output_cap_bytes: int = 1 << 30,
        give_up_s: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes {chunk_bytes}: expected at least 1")
        self.store = store
        self.root = root
        self.chunk_bytes = chunk_bytes
        self.output_cap_bytes = output_cap_bytes
        self.give_up_s = give_up_s  # how long the process runner holds an exit back for a failing store
        self.clock = clock
        self._done: set[str] = set()  # run dirs finalized
        self._uploaded: dict[str, set[str]] = {}  # run dir -> its outputs put in this life
        self._failing: set[tuple[str, str]] = set()  # (run dir, what) told as failing

    def finalized(self, run_dir: Path) -> bool:
        return run_dir.name in self._done or is_finalized(run_dir)

    async def ship(self) -> None:
        """One round over every run directory; never raises: failures are logged once per run and
        what, and tried again next round."""
        try:
            dirs = sorted(p for p in self.root.iterdir() if p.name not in self._done and p.is_dir())
        except FileNotFoundError:
            return
        for path in dirs:
            try:
                await self.ship_run(path)
            except Exception as exc:  # one broken run directory must not stop the others, or the agent
                self._failed(path, "its run directory", exc, trace=True)

    async def ship_run(self, path: Path) -> bool:
        """Ship what is new of one run; True once it is finalized."""
        spec = files.read_json(path / files.SPEC)
        if spec is None:
            return False
        run = _Run(path, str(spec["workload_id"]), str(spec["placement_id"]))
        state = _Shipped.load(path)
        ended = (path / files.EXIT).exists()  # looked at first: the log is then read to its very end
        if not state.finalized:
            if not await self._step(run, "its log", self._ship_log(run, state)) or not ended:
                return False
            if not await self._step(run, "its log end and outputs", self._finalize(run, state)):
                return False
        self._done.add(path.name)
        self._uploaded.pop(path.name, None)
        return True

    async def _step(self, run: _Run, what: str, work: Awaitable[bool]) -> bool:
        try:
            done = await work
        except ObjectStoreError as exc:
            self._failed(run.path, what, exc)
            return False
        if (run.path.name, what) in self._failing:
            self._failing.discard((run.path.name, what))
            log.warning("run %s: %s reach the object store %s again", run.path.name, what, self.store.url)
        return done

    def _failed(self, path: Path, what: str, exc: Exception, *, trace: bool = False) -> None:
        if (path.name, what) not in self._failing:
            self._failing.add((path.name, what))
            log.error(
                "run %s: shipping %s to the object store %s failed (%s: %s); tried again every tick",
                path.name,
                what,
                self.store.url,
                type(exc).__name__,
                exc,
                exc_info=exc if trace else None,
            )

    async def _ship_log(self, run: _Run, state: _Shipped) -> bool:
        """The output's new bytes as chunks; True when all there is was shipped (or counted dropped)."""
        if state.pending is not None:
            await self._resume(run, state)
        while True:
            got = await asyncio.to_thread(read_next, run.path, state.offset, self.chunk_bytes)
            if got is None:
                return False
            start, data = got
            state.dropped += start - state.offset
            state.offset = start
            if not data:
                return True
            state.pending = {
                "seq": state.seq,
                "unix_ms": int(self.clock() * 1000),
                "start": start,
                "end": start + len(data),
            }
            await asyncio.to_thread(state.save, run.path)  # its key is fixed before its bytes leave
            await self.store.put(self._chunk_key(run, state.pending), data)
            state.commit()
            await asyncio.to_thread(state.save, run.path)

    async def _resume(self, run: _Run, state: _Shipped) -> None:
        """The chunk a previous life recorded but maybe did not put: put again, same key, same bytes."""
        assert state.pending is not None
        p = state.pending
        key = self._chunk_key(run, p)
        data = await asyncio.to_thread(read_range, run.path, p["start"], p["end"])
        if data is not None:
            await self.store.put(key, data)
        elif not await self._exists(key):  # rotated away before it ever left
            state.dropped += p["end"] - state.offset
            state.offset, state.pending = p["end"], None
            await asyncio.to_thread(state.save, run.path)
            return
        state.commit()
        await asyncio.to_thread(state.save, run.path)

    @staticmethod
    def _chunk_key(run: _Run, pending: dict[str, int]) -> str:
        return keys.log_chunk(
            run.workload_id, run.placement_id, seq=pending["seq"], unix_ms=pending["unix_ms"]
        )

    async def _exists(self, key: str) -> bool:
        try:
            await self.store.head(key)
        except ObjectNotFound:
            return False
        return True

    async def _finalize(self, run: _Run, state: _Shipped) -> bool:
        """After the last chunk: the log end, the outputs, their manifest (last), then shipped.json."""
        if not state.log_ended:
            end = {"at": self._now(), "bytes": state.shipped, "dropped_bytes": state.dropped}
            await self.store.put(keys.log_end(run.workload_id, run.placement_id), _json(end))
            state.log_ended = True
            await asyncio.to_thread(state.save, run.path)
        manifest = await self._upload_outputs(run)
        await self.store.put(keys.output_manifest(run.workload_id, run.placement_id), _json(manifest))
        state.finalized = True
        await asyncio.to_thread(state.save, run.path)
        log.info(
            "run %s: log (%d bytes, %d dropped) and %d output file(s) in the object store %s",
            run.path.name,
            state.shipped,
            state.dropped,
            len(manifest["files"]),
            self.store.url,
        )
        return True

    async def _upload_outputs(self, run: _Run) -> dict[str, Any]:
        kept, dropped = await asyncio.to_thread(
            collect_outputs, run.path / files.OUTPUT_DIR, self.output_cap_bytes
        )
        done = self._uploaded.setdefault(run.path.name, set())
        listed: list[dict[str, Any]] = []
        for rel, path, size in kept:
            if rel not in done:
                try:
                    await self.store.put_file(keys.output_file(run.workload_id, run.placement_id, rel), path)
                except ValueError:  # a control character, or bytes that are no UTF-8, in its name
                    why = "its name cannot name an object"
                    dropped.append({"path": shown(rel), "size": size, "why": why})
                    continue
                done.add(rel)
            listed.append({"path": rel, "size": size})
        return {
            "workload_id": run.workload_id,
            "placement_id": run.placement_id,
            "at": self._now(),
            "files": listed,
            "total_bytes": sum(int(f["size"]) for f in listed),
            "cap_bytes": self.output_cap_bytes,
            "dropped": dropped,
        }

    def _now(self) -> str:
        return datetime.fromtimestamp(self.clock(), UTC).isoformat()


def _json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
