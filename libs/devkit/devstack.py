"""`make run`: the whole suite on one machine, supervised, stopped cleanly by Ctrl-C.

Starts the embedded broker (unless KAFKA_BOOTSTRAP_SERVERS is set), migrates every service's schema,
starts the six services, the gateway (the web console, on the port below the services') and the
simulated node agent as child processes, waits until every `/readyz` answers 200, prints where to go
(the console's URL first), and on SIGINT/SIGTERM stops everything it started.
While it runs, a process that ends (a service killed, the broker killed, the agent exiting) is
started again with exponential backoff by the `Supervisor`, which prints one line per crash and
per restart. `Stack` is also what the cross-service flow tests use to start, kill and restart
services (unsupervised: the tests decide when a process comes back).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from libs.common.db.migrate import SERVICES, migrate, service_migrations
from libs.common.settings import session_url
from libs.devkit.broker import EmbeddedBroker

__all__ = ["GATEWAY", "Backoff", "Stack", "Supervisor", "main", "supervise"]

BASE_PORT = 8001
AGENT = "agent"
BROKER = "broker"
GATEWAY = "gateway"
DEFAULT_FLEET = (
    Path(__file__).resolve().parents[2] / "services" / "inventory" / "adapters" / "fleets" / "default.yaml"
)


@dataclass
class Stack:
    """The six services (the gateway and the node agent too, when asked) as child processes sharing one
    environment. The gateway listens on ``gateway_port``, by default the port below ``base_port``."""

    env: dict[str, str]
    logs: Path
    base_port: int = BASE_PORT
    agent: bool = True
    gateway: bool = False
    gateway_port: int | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Every process of the stack, services first."""
        return [*self.servers, *([AGENT] if self.agent else [])]

    @property
    def servers(self) -> list[str]:
        """The processes that answer HTTP (/readyz): the services, then the gateway when it runs."""
        return [*SERVICES, *([GATEWAY] if self.gateway else [])]

    def port(self, service: str) -> int:
        """The HTTP port of a service (or of the gateway)."""
        if service == GATEWAY:
            return self.gateway_port if self.gateway_port is not None else self.base_port - 1
        return self.base_port + SERVICES.index(service)

    def url(self, service: str) -> str:
        """The base URL of a service."""
        return f"http://127.0.0.1:{self.port(service)}"

    def schema(self, service: str) -> str:
        """The Postgres schema of a service."""
        return f"{self.env.get('GPUCLOUD_SCHEMA_PREFIX', '')}{service}"

    def migrate(self) -> None:
        """Apply every service's migrations."""
        url = self.env.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
        direct = self.env.get("DATABASE_DIRECT_URL", "")  # migrations need Postgres itself, not a pooler
        for service in SERVICES:
            schema = self.schema(service)
            dsn = session_url(database_url=url, direct_url=direct, schema=schema)
            asyncio.run(migrate(dsn=dsn, schema=schema, migrations=service_migrations(service)))

    def start(self, name: str | None = None) -> None:
        """Start one process, or every process not running yet."""
        for each in [name] if name else self.names:
            if each in self.procs and self.procs[each].poll() is None:
                continue
            self.procs[each] = self._spawn(each)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send a signal (SIGKILL by default) to one process and wait for it to end."""
        proc = self.procs[name]
        proc.send_signal(sig)
        proc.wait(timeout=20)

    def restart(self, name: str) -> None:
        """Start a process again after it ended."""
        self.start(name)

    def exit_status(self, name: str) -> int | None:
        """A process's exit status once it has ended; None while it runs."""
        return self.procs[name].poll()

    def ready(self, service: str) -> bool:
        """Whether a service's /readyz answers 200 now."""
        try:
            return httpx.get(f"{self.url(service)}/readyz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def exited(self) -> list[str]:
        """Processes that ended on their own, with their status."""
        return [f"{n} exited with {p.returncode}" for n, p in self.procs.items() if p.poll() is not None]

    def wait_ready(self, *, timeout_s: float, only: list[str] | None = None) -> list[str]:
        """Services whose /readyz is not 200 when the timeout ends (empty = all ready)."""
        deadline = time.monotonic() + timeout_s
        pending = set(only or self.servers)
        while pending and time.monotonic() < deadline:
            if self.exited():
                return self.exited()
            pending -= {service for service in sorted(pending) if self.ready(service)}
            time.sleep(0.3)
        return sorted(pending)

    def stop(self) -> None:
        """SIGTERM every process, then SIGKILL what is left after 15 s."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _spawn(self, name: str) -> subprocess.Popen[bytes]:
        if name == AGENT:
            args, env = ["-m", "services.telemetry", "agent"], dict(self.env)
        elif name == GATEWAY:
            args = ["-m", "services.gateway"]
            urls = {f"GATEWAY_{s.upper()}_URL": self.url(s) for s in SERVICES}
            env = {**self.env, **urls, "GATEWAY_HTTP_PORT": str(self.port(GATEWAY))}
        else:
            args = ["-m", f"services.{name}"]
            env = {
                **self.env,
                f"{name.upper()}_HTTP_PORT": str(self.port(name)),
                "DB_SCHEMA": self.schema(name),
            }
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it until it exits
        return subprocess.Popen([sys.executable, *args], env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603


@dataclass(frozen=True)
class Backoff:
    """The wait before restarting a process: ``first_s``, doubling at each crash up to ``max_s``, and
    back to ``first_s`` for a crash after it had stayed up ``reset_after_s``."""

    first_s: float = 0.5
    max_s: float = 30.0
    reset_after_s: float = 60.0


@dataclass
class _Watched:
    started_at: float
    delay_s: float
    restarts: int = 0
    due_at: float | None = None  # when a restart is scheduled: the process has ended
    awaiting_ready: bool = False


def _stderr(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


@dataclass
class Supervisor:
    """Keeps processes running: one that ends is started again after a backoff, and each crash, restart
    and return to readiness is said in one line (``scheduler exited with code -9; restarting in 1.0s
    (restart 2)``). ``tick`` does one round; the caller calls it in its loop and stops calling it to stop.
    """

    names: Sequence[str]
    exit_status: Callable[[str], int | None]
    launch: Callable[[str], None]
    #: A readiness probe per name, for the "is ready again" line (names without one are not probed).
    probes: Mapping[str, Callable[[], bool]] = field(default_factory=dict)
    say: Callable[[str], None] = _stderr
    clock: Callable[[], float] = time.monotonic
    backoff: Backoff = field(default_factory=Backoff)
    _watched: dict[str, _Watched] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        now = self.clock()
        self._watched = {n: _Watched(started_at=now, delay_s=self.backoff.first_s) for n in self.names}

    def tick(self) -> None:
        """Look at every process once: schedule the restart of one that ended, start the ones now due."""
        now = self.clock()
        for name, watched in self._watched.items():
            if watched.due_at is None:
                self._look_at(name, watched, now)
            elif now >= watched.due_at:
                self._relaunch(name, watched, now)

    def _look_at(self, name: str, watched: _Watched, now: float) -> None:
        code = self.exit_status(name)
        if code is not None:
            self._schedule(name, watched, now, f"exited with code {code}")
        elif watched.awaiting_ready and self.probes[name]():
            watched.awaiting_ready = False
            self.say(f"{name} is ready again (restart {watched.restarts})")

    def _schedule(self, name: str, watched: _Watched, now: float, what: str) -> None:
        if now - watched.started_at >= self.backoff.reset_after_s:
            watched.delay_s = self.backoff.first_s
        watched.restarts += 1
        watched.due_at, watched.awaiting_ready = now + watched.delay_s, False
        self.say(f"{name} {what}; restarting in {watched.delay_s:.1f}s (restart {watched.restarts})")
        watched.delay_s = min(watched.delay_s * 2, self.backoff.max_s)

    def _relaunch(self, name: str, watched: _Watched, now: float) -> None:
        watched.due_at, watched.started_at = None, now
        try:
            self.launch(name)
        except Exception as exc:  # e.g. the broker's port still taken: a crash like any other
            self._schedule(name, watched, self.clock(), f"failed to start ({exc})")
            return
        watched.awaiting_ready = name in self.probes
        self.say(f"{name} started again (restart {watched.restarts})")


def supervise(stack: Stack, broker: EmbeddedBroker | None = None) -> Supervisor:
    """A supervisor of every process of ``stack``, and of the embedded broker when there is one."""

    def exit_status(name: str) -> int | None:
        if name != BROKER:
            return stack.exit_status(name)
        assert broker is not None
        proc = broker._proc  # EmbeddedBroker shows only a live pid; the exit status is what a reader needs
        return None if proc is None else proc.poll()

    def launch(name: str) -> None:
        if name != BROKER:
            stack.start(name)
            return
        assert broker is not None
        broker.start()

    return Supervisor(
        names=[*([BROKER] if broker else []), *stack.names],
        exit_status=exit_status,
        launch=launch,
        probes={s: functools.partial(stack.ready, s) for s in stack.servers},
    )


def _admin_key(run_dir: Path) -> tuple[str, str]:
    """The admin key from the environment, or one generated once and kept in .run/admin-key."""
    if os.environ.get("ADMIN_API_KEY"):
        return os.environ["ADMIN_API_KEY"], "the ADMIN_API_KEY environment variable"
    path = run_dir / "admin-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32) + "\n")
        path.chmod(0o600)
    return path.read_text().strip(), str(path)


def _banner(stack: Stack, kafka: str, key_source: str, took_s: float) -> str:
    lines = ["", f"gpucloud is up (all /readyz 200 after {took_s:.1f}s):"]
    if stack.gateway:
        lines.append(f"  console    {stack.url(GATEWAY)}/")
    lines += [f"  {s:<10} {stack.url(s)}/docs" for s in SERVICES]
    lines += [
        f"  broker     {kafka}",
        f"  admin key  in {key_source}",
        f"  logs       {stack.logs}/",
        "  next       the guided tour in README.md (make demo); Ctrl-C stops everything",
        "",
    ]
    return "\n".join(lines)


def _until_ready(
    stack: Stack, supervisor: Supervisor, *, timeout_s: float, stopping: Callable[[], bool]
) -> list[str]:
    """Services not ready when ``timeout_s`` ends (empty: all ready), restarting what ends meanwhile."""
    deadline, pending = time.monotonic() + timeout_s, set(stack.servers)
    while pending and time.monotonic() < deadline and not stopping():
        supervisor.tick()
        pending -= {service for service in sorted(pending) if stack.ready(service)}
        time.sleep(0.3)
    return sorted(pending)


def main(argv: list[str] | None = None) -> int:
    """Run the stack in the foreground until interrupted; returns the exit status."""
    parser = argparse.ArgumentParser(description="Run the whole gpucloud suite locally.")
    parser.add_argument("--base-port", type=int, default=int(os.environ.get("GPUCLOUD_BASE_PORT", BASE_PORT)))
    parser.add_argument("--broker-port", type=int, default=int(os.environ.get("GPUCLOUD_BROKER_PORT", 9092)))
    parser.add_argument("--run-dir", type=Path, default=Path(os.environ.get("GPUCLOUD_RUN_DIR", ".run")))
    parser.add_argument("--no-agent", action="store_true", help="do not start the node agent")
    parser.add_argument(
        "--gateway-port",
        type=int,
        default=int(os.environ["GATEWAY_HTTP_PORT"]) if os.environ.get("GATEWAY_HTTP_PORT") else None,
        help="the console's port (default: the one below --base-port, 8000)",
    )
    parser.add_argument("--ready-timeout", type=float, default=60.0)
    parser.add_argument(
        "--stop-with-parent",
        action="store_true",
        help="stop the stack when the process that started this one ends (tests and benchmarks: a runner "
        "killed mid-run leaves no stack behind)",
    )
    args = parser.parse_args(argv)
    parent = os.getppid()

    logs = args.run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    admin_key, key_source = _admin_key(args.run_dir)
    broker = None
    kafka = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not kafka:
        broker = EmbeddedBroker(port=args.broker_port, log_path=logs / "broker.log").start()
        kafka = broker.bootstrap
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": kafka,
        "ADMIN_API_KEY": admin_key,
        "PYTHONUNBUFFERED": "1",
    }
    env.setdefault("ENVIRONMENT", "development")
    # Workloads' logs, outputs and checkpoints: a local directory the agent writes and the API reads.
    env.setdefault("OBJECT_STORE_URL", (args.run_dir / "objects").resolve().as_uri())
    # The embedded default simulates 16 nodes x 8 GPUs; an agent on a GPU host reads NVML instead.
    env.setdefault("TELEMETRY_FLEET_FILE", str(DEFAULT_FLEET))
    if broker is None:
        # The agent's checkpoint, for a broker that outlives this stack. The embedded one starts empty
        # every time: there would be nothing to resume, only a refused checkpoint at each start.
        env.setdefault("TELEMETRY_AGENT_STATE_DIR", str((args.run_dir / "agent").resolve()))
    stack = Stack(
        env=env,
        logs=logs,
        base_port=args.base_port,
        agent=not args.no_agent,
        gateway=True,
        gateway_port=args.gateway_port,
    )

    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stopping.set()

    # A closed terminal (SIGHUP) stops the stack as Ctrl-C does, instead of leaving its processes running.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)

    def should_stop() -> bool:
        if args.stop_with_parent and not stopping.is_set() and os.getppid() != parent:
            print(f"the process that started this stack ({parent}) has ended", flush=True)
            stopping.set()
        return stopping.is_set()

    try:
        stack.migrate()
        started = time.monotonic()
        stack.start()
        supervisor = supervise(stack, broker)
        not_ready = _until_ready(stack, supervisor, timeout_s=args.ready_timeout, stopping=should_stop)
        if should_stop():
            return 0
        if not_ready:
            print(
                f"not ready after {args.ready_timeout:.0f}s: {', '.join(not_ready)}; see {logs}/",
                file=sys.stderr,
            )
            return 1
        print(_banner(stack, kafka, key_source, time.monotonic() - started), flush=True)
        while not stopping.wait(0.5) and not should_stop():
            supervisor.tick()
        return 0
    finally:
        print("stopping...", flush=True)
        stack.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
