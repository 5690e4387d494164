"""`make run`: the whole suite on one machine, stopped cleanly by Ctrl-C.

Starts the embedded broker (unless KAFKA_BOOTSTRAP_SERVERS is set), migrates every service's schema,
starts the six services and the simulated node agent as child processes, waits until every
`/readyz` answers 200, prints where to go, and on SIGINT/SIGTERM stops everything it started.
`Stack` is also what the cross-service flow tests use to start, kill and restart services.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from libs.common.db.migrate import SERVICES, migrate, service_migrations
from libs.devkit.broker import EmbeddedBroker

__all__ = ["Stack", "main"]

BASE_PORT = 8001
AGENT = "agent"
DEFAULT_FLEET = (
    Path(__file__).resolve().parents[2] / "services" / "inventory" / "adapters" / "fleets" / "default.yaml"
)


@dataclass
class Stack:
    """The six services (and the node agent) as child processes sharing one environment."""

    env: dict[str, str]
    logs: Path
    base_port: int = BASE_PORT
    agent: bool = True
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Every process of the stack, services first."""
        return [*SERVICES, AGENT] if self.agent else list(SERVICES)

    def port(self, service: str) -> int:
        """The HTTP port of a service."""
        return self.base_port + SERVICES.index(service)

    def url(self, service: str) -> str:
        """The base URL of a service."""
        return f"http://127.0.0.1:{self.port(service)}"

    def schema(self, service: str) -> str:
        """The Postgres schema of a service."""
        return f"{self.env.get('GPUCLOUD_SCHEMA_PREFIX', '')}{service}"

    def migrate(self) -> None:
        """Apply every service's migrations."""
        dsn = self.env.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
        for service in SERVICES:
            asyncio.run(migrate(dsn=dsn, schema=self.schema(service), migrations=service_migrations(service)))

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

    def exited(self) -> list[str]:
        """Processes that ended on their own, with their status."""
        return [f"{n} exited with {p.returncode}" for n, p in self.procs.items() if p.poll() is not None]

    def wait_ready(self, *, timeout_s: float, only: list[str] | None = None) -> list[str]:
        """Services whose /readyz is not 200 when the timeout ends (empty = all ready)."""
        deadline = time.monotonic() + timeout_s
        pending = set(only or SERVICES)
        while pending and time.monotonic() < deadline:
            if self.exited():
                return self.exited()
            for service in sorted(pending):
                try:
                    if httpx.get(f"{self.url(service)}/readyz", timeout=1.0).status_code == 200:
                        pending.discard(service)
                except httpx.HTTPError:
                    pass
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
        else:
            args = ["-m", f"services.{name}"]
            env = {
                **self.env,
                f"{name.upper()}_HTTP_PORT": str(self.port(name)),
                "DB_SCHEMA": self.schema(name),
            }
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it until it exits
        return subprocess.Popen([sys.executable, *args], env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603


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
    lines += [f"  {s:<10} {stack.url(s)}/docs" for s in SERVICES]
    lines += [
        f"  broker     {kafka}",
        f"  admin key  in {key_source}",
        f"  logs       {stack.logs}/",
        "  next       the guided tour in README.md (make demo); Ctrl-C stops everything",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the stack in the foreground until interrupted; returns the exit status."""
    parser = argparse.ArgumentParser(description="Run the whole gpucloud suite locally.")
    parser.add_argument("--base-port", type=int, default=int(os.environ.get("GPUCLOUD_BASE_PORT", BASE_PORT)))
    parser.add_argument("--broker-port", type=int, default=int(os.environ.get("GPUCLOUD_BROKER_PORT", 9092)))
    parser.add_argument("--run-dir", type=Path, default=Path(os.environ.get("GPUCLOUD_RUN_DIR", ".run")))
    parser.add_argument("--no-agent", action="store_true", help="do not start the node agent")
    parser.add_argument("--ready-timeout", type=float, default=60.0)
    args = parser.parse_args(argv)

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
    # The embedded default simulates 16 nodes x 8 GPUs; an agent on a GPU host reads NVML instead.
    env.setdefault("TELEMETRY_FLEET_FILE", str(DEFAULT_FLEET))
    if broker is None:
        # The agent's checkpoint, for a broker that outlives this stack. The embedded one starts empty
        # every time: there would be nothing to resume, only a refused checkpoint at each start.
        env.setdefault("TELEMETRY_AGENT_STATE_DIR", str((args.run_dir / "agent").resolve()))
    stack = Stack(env=env, logs=logs, base_port=args.base_port, agent=not args.no_agent)

    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        stack.migrate()
        started = time.monotonic()
        stack.start()
        not_ready = stack.wait_ready(timeout_s=args.ready_timeout)
        if not_ready:
            print(
                f"not ready after {args.ready_timeout:.0f}s: {', '.join(not_ready)}; see {logs}/",
                file=sys.stderr,
            )
            return 1
        print(_banner(stack, kafka, key_source, time.monotonic() - started), flush=True)
        while not stopping:
            if stack.exited():
                print(f"{'; '.join(stack.exited())}; stopping (see {logs}/)", file=sys.stderr)
                return 1
            time.sleep(0.5)
        return 0
    finally:
        print("stopping...", flush=True)
        stack.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
