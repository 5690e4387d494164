"""Process runner bench: placed-event to running, and one agent holding 500 short workloads at once.

Real: the embedded broker (Tansu), the node agent's own loop (NodeAgent.run: the intake's consumer, the
sample ticks at 1 s, the quick poll, the producer with acks=all), the process runner with its launcher,
and one real supervisor and one real process per workload. Stand-ins: the node is a simulated one
(1 node, 8 GPUs: samples flow as from a host, without NVML), and this script publishes the placed events
(no scheduler). The agent runs in this process, so the timestamps share one clock:

- published: this script's producer had the WorkloadPlacedV1 acknowledged;
- consumed: the agent applied it (the runner's start() was called: the intake read it);
- running: the agent's producer had its WorkloadStartedV1 acknowledged by the broker (the supervisor had
  exec'd the command and written started.json, and the agent had seen it and published it).

"before" replays the same placements the way the agent ran them before the quick poll and the
launcher: launched at the next tick, started.json seen at a tick, a fresh interpreter per supervisor.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit as emit_line
from bench.common import log, percentile
from libs.common.bus.kafka import all_physical_topics, create_producer, ensure_topics
from libs.common.events import encode, envelop, topics
from libs.common.events.scheduler import AllocationItem, RunSpec, WorkloadPlacedV1
from libs.devkit.broker import EmbeddedBroker
from services.telemetry.adapters.agent.publisher import Publisher
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.process import ProcessRunner
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.service.agent.process import NodeAgent, utc_now
from services.telemetry.service.agent.setup import resolve_setup
from services.telemetry.settings import TelemetrySettings

BENCH = "runner.start (real agent loop, broker, supervisors)"
NODE = "bnode-a"
GPUS = [gpu_uuid(hostname=NODE, index=i) for i in range(8)]
FLEET = f"""nodes:
  - hostname: {NODE}
    labels: {{zone: z1}}
    gpus:
      - {{model: H100-80GB-SXM, count: 8}}
"""
STARTED = b'"agent.workload.started.v1"'
EXITED = b'"agent.workload.exited.v1"'


def emit(metric: str, value: float, unit: str, **extra: object) -> None:
    emit_line(BENCH, metric, value, unit, **extra)


class TimedPublisher(Publisher):
    """The agent's real producer, noting when each workload's start and exits were acknowledged."""

    def __init__(self) -> None:
        super().__init__()
        self._in_flight: list[tuple[bytes, bool]] = []
        self.started: dict[str, float] = {}
        self.exits: dict[str, int] = {}
        self.last_exit_at = 0.0

    def queue(self, topic: str, *, key: bytes, value: bytes) -> None:
        if STARTED in value or EXITED in value:
            self._in_flight.append((key, STARTED in value))
        super().queue(topic, key=key, value=value)

    async def flush(self) -> None:
        sent, self._in_flight = self._in_flight, []
        try:
            await super().flush()
        except BaseException:
            self._in_flight = sent + self._in_flight  # the agent sends them again
            raise
        now = time.monotonic()
        for key, started in sent:
            workload = key.decode()
            if started:
                self.started.setdefault(workload, now)
            else:
                self.exits[workload] = self.exits.get(workload, 0) + 1
                self.last_exit_at = now


class TimedRunner(ProcessRunner):
    """The real process runner, noting when the agent handed it each placement (its consumption)."""

    consumed: dict[str, float]

    def start(self, **kwargs: Any) -> None:
        self.consumed.setdefault(str(kwargs["workload_id"]), time.monotonic())
        super().start(**kwargs)


class OldRunner(TimedRunner):
    """As before: no launcher (a fresh interpreter per supervisor) and no quick poll."""

    def awaiting_start(self) -> bool:
        return False

    def _supervise(self, path: Path) -> Any:
        self._launcher.launch = lambda _path: False  # type: ignore[method-assign,assignment]
        return super()._supervise(path)


class TimedAgent(NodeAgent):
    """The real agent, timing its ticks."""

    tick_s: list[float]

    async def tick(self, *, spread_s: float = 0.0) -> None:
        started = time.monotonic()
        await super().tick(spread_s=spread_s)
        self.tick_s.append(time.monotonic() - started)


@dataclasses.dataclass
class Run:
    agent: TimedAgent
    runner: TimedRunner
    out: TimedPublisher
    producer: Any
    settings: TelemetrySettings
    published: dict[str, float] = dataclasses.field(default_factory=dict)

    async def place(self, workload: str, *command: str) -> None:
        event = WorkloadPlacedV1(
            workload_id=workload,
            tenant_id="bench",
            placement_id=f"pl-{workload}",
            node=NODE,
            allocations=[
                AllocationItem(gpu_uuid=GPUS[hash(workload) % len(GPUS)], units=Decimal(1), model="H100")
            ],
            kind="job",
            run=RunSpec(command=list(command), grace_s=1),
        )
        envelope = envelop(event, source="bench")
        topic = self.settings.topic(topics.SCHEDULER)
        await self.producer.send_and_wait(topic, key=workload.encode(), value=encode(envelope))
        self.published[workload] = time.monotonic()

    async def until(self, done: Any, *, timeout: float, what: str) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return True
            await asyncio.sleep(0.02)
        log(f"{what}: not within {timeout:.0f}s")
        return False


@contextlib.asynccontextmanager
async def agent_running(bootstrap: str, workdir: Path, name: str, runner_cls: type[TimedRunner]) -> Any:
    fleet = workdir / "fleet.yaml"
    fleet.write_text(FLEET)
    settings = TelemetrySettings(
        kafka_bootstrap_servers=bootstrap,
        kafka_topic_prefix=f"bench{name}.",
        kafka_partitions=3,
        agent_mode="simulated",
        agent_runner="process",
        fleet_file=fleet,
        sample_interval_s=1.0,
        agent_workload_dir=workdir / f"runs-{name}",
        log_json=False,
    )
    await ensure_topics(
        bootstrap=bootstrap, topics=all_physical_topics(settings.kafka_topic_prefix), partitions=3
    )
    setup = await resolve_setup(settings=settings, clock=utc_now)
    runner = runner_cls(root=workdir / f"runs-{name}", card_memory={}, log_quota_bytes=1 << 20)
    runner.consumed = {}
    setup = dataclasses.replace(setup, runner=runner)
    out = TimedPublisher()
    agent = TimedAgent(settings=settings, setup=setup, publisher=out)
    agent.tick_s = []
    producer = create_producer(bootstrap=bootstrap, client_id="bench-scheduler", linger_ms=0)
    await producer.start()
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        while agent.ticks < 2:  # caught up with the (empty) history and ticking
            await asyncio.sleep(0.05)
        yield Run(agent=agent, runner=runner, out=out, producer=producer, settings=settings)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)
        await producer.stop()
        kill_all(workdir / f"runs-{name}")


def kill_all(root: Path) -> None:
    for run in root.glob("*"):
        for name in (files.STARTED, files.SUPERVISOR):
            doc = files.read_json(run / name)
            if doc is not None and files.process_start(int(doc["pid"])) == doc.get("start"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(doc["pid"]), signal.SIGKILL)


async def latency(run: Run, *, n: int, every_s: float, label: str) -> tuple[float, float]:
    """n placements of a short job, one every every_s; placed-to-running figures (ms)."""
    names = [f"{label}-{i:04d}" for i in range(n)]
    for name in names:
        await run.place(name, "sleep", "0.3")
        await asyncio.sleep(every_s)
    await run.until(lambda: all(w in run.out.started for w in names), timeout=30, what=f"{label} starts")
    consumed = [1000 * (run.out.started[w] - run.runner.consumed[w]) for w in names if w in run.out.started]
    published = [1000 * (run.out.started[w] - run.published[w]) for w in names if w in run.out.started]
    suffix = "" if label == "after" else f"_{label}"
    if label == "after":
        stages(run, names)
    emit(f"consumed_to_running_p50_ms{suffix}", percentile(consumed, 50), "ms", n=len(consumed))
    emit(f"consumed_to_running_p99_ms{suffix}", percentile(consumed, 99), "ms", n=len(consumed))
    emit(f"published_to_running_p50_ms{suffix}", percentile(published, 50), "ms", n=len(published))
    emit(f"published_to_running_p99_ms{suffix}", percentile(published, 99), "ms", n=len(published))
    return percentile(consumed, 50), percentile(consumed, 99)


def stages(run: Run, names: list[str]) -> None:
    """Where the time goes: to the launch (spec.json written), to the exec (started.json's time), to the
    acknowledged WorkloadStartedV1; from the run directories' own timestamps (wall clock, same host)."""
    offset = time.time() - time.monotonic()
    parts: dict[str, list[float]] = {"launch": [], "exec": [], "told": []}
    for w in names:
        path = run.runner.root / files.run_dir_name(workload_id=w, placement_id=f"pl-{w}")
        spec, started = files.read_json(path / files.SPEC), files.read_json(path / files.STARTED)
        if spec is None or started is None or w not in run.out.started:
            continue
        launched = datetime.fromisoformat(spec["created_at"]).timestamp() - offset
        execd = datetime.fromisoformat(started["at"]).timestamp() - offset
        parts["launch"].append(1000 * (launched - run.runner.consumed[w]))
        parts["exec"].append(1000 * (execd - launched))
        parts["told"].append(1000 * (run.out.started[w] - execd))
    for stage, values in parts.items():
        if values:
            emit(f"stage_{stage}_p50_ms", percentile(values, 50), "ms", p99=round(percentile(values, 99), 1))


def memory(pids: list[int]) -> tuple[float, float]:
    """RSS and PSS of these processes together, MiB (PSS shares the pages forks have in common)."""
    rss = pss = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
    return rss / 1024, pss / 1024


async def loop_lag(samples: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        started = time.monotonic()
        await asyncio.sleep(0.01)
        samples.append(time.monotonic() - started - 0.01)


async def concurrent(run: Run, *, n: int, seconds: float) -> None:
    """n workloads of `sleep seconds` placed at once; every exit must be told exactly once."""
    names = [f"many-{i:04d}" for i in range(n)]
    ticks_before = len(run.agent.tick_s)
    lag: list[float] = []
    stop = asyncio.Event()
    lagger = asyncio.create_task(loop_lag(lag, stop))
    started = time.monotonic()
    await asyncio.gather(*(run.place(name, "sleep", str(seconds)) for name in names))
    all_running = await run.until(
        lambda: all(w in run.out.started for w in names), timeout=60, what="all running at once"
    )
    running_at = time.monotonic()
    sups = [files.read_json(p / files.SUPERVISOR) for p in run.runner.root.glob("many-*")]
    rss, pss = memory([int(s["pid"]) for s in sups if s is not None])
    await run.until(lambda: all(w in run.out.exits for w in names), timeout=60, what="all exits")
    await asyncio.sleep(2.5)  # would a duplicate come at the next ticks?
    stop.set()
    await lagger
    told = [run.out.exits.get(w, 0) for w in names]
    ticks = run.agent.tick_s[ticks_before:]
    emit("concurrent_workloads", n, "workloads", command=f"sleep {seconds:g}")
    emit("concurrent_all_running", 1 if all_running else 0, "bool")
    emit("concurrent_place_to_all_running_s", running_at - started, "s")
    emit("concurrent_exits_reported", sum(1 for c in told if c), "workloads")
    emit("concurrent_exits_lost", sum(1 for c in told if c == 0), "workloads")
    emit("concurrent_exits_duplicated", sum(c - 1 for c in told if c > 1), "reports")
    emit(
        "concurrent_wall_s", run.out.last_exit_at - started, "s", note="placing to the last exit acknowledged"
    )
    emit("concurrent_tick_p99_ms", 1000 * percentile(ticks, 99), "ms", ticks=len(ticks), interval_ms=1000)
    emit("concurrent_slow_ticks", sum(1 for t in ticks if t > 1.0), "ticks over the 1 s interval")
    emit("concurrent_loop_lag_p99_ms", 1000 * percentile(lag, 99), "ms", note="event-loop stall, 10 ms probe")
    emit(
        "supervisors_rss_mib",
        rss,
        "MiB",
        supervisors=len(sups),
        per_supervisor=round(rss / max(len(sups), 1), 2),
    )
    emit("supervisors_pss_mib", pss, "MiB", per_supervisor=round(pss / max(len(sups), 1), 2))


async def main_async(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="runner-bench-"))
    try:
        await measure(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def measure(args: argparse.Namespace, workdir: Path) -> None:
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        async with agent_running(broker.bootstrap, workdir, "old", OldRunner) as old:
            before = await latency(old, n=args.before, every_s=0.1, label="before")
        async with agent_running(broker.bootstrap, workdir, "new", TimedRunner) as new:
            await latency(new, n=3, every_s=0.1, label="warmup")  # the launcher's own start
            after = await latency(new, n=args.placements, every_s=args.every, label="after")
            emit(
                "speedup_p50", before[0] / after[0], "x", note="before p50 / after p50 (consumed to running)"
            )
            emit(
                "speedup_p99", before[1] / after[1], "x", note="before p99 / after p99 (consumed to running)"
            )
            await concurrent(new, n=args.concurrent, seconds=args.seconds)
            emit("launcher_processes", new.runner._launcher.started, "started")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placements", type=int, default=200)
    parser.add_argument("--every", type=float, default=0.05, help="seconds between placements")
    parser.add_argument("--before", type=int, default=30, help="placements run the old way")
    parser.add_argument("--concurrent", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=2.0, help="each concurrent workload's sleep")
    args = parser.parse_args()
    log(f"{datetime.now():%H:%M:%S} runner bench: {args}")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
