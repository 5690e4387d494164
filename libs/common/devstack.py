"""`make run`: the whole suite on one machine, stopped cleanly by Ctrl-C.

Starts the embedded broker (unless KAFKA_BOOTSTRAP_SERVERS is set), migrates every service's schema,
starts the six services and the simulated node agent as child processes, waits until every
`/readyz` answers 200, prints where to go, and on SIGINT/SIGTERM stops everything it started.
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
from dataclasses import dataclass
from pathlib import Path

import httpx

from libs.common.broker import EmbeddedBroker
from libs.common.db.migrate import SERVICES, migrate, service_migrations

__all__ = ["main"]

BASE_PORT = 8001


@dataclass
class Child:
    """A process the stack started."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int | None


def _admin_key(run_dir: Path) -> tuple[str, str]:
    """The admin key from the environment, or one generated once and kept in .run/admin-key."""
    if os.environ.get("ADMIN_API_KEY"):
        return os.environ["ADMIN_API_KEY"], "the ADMIN_API_KEY environment variable"
    path = run_dir / "admin-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32) + "\n")
        path.chmod(0o600)
    return path.read_text().strip(), str(path)


def _spawn(name: str, args: list[str], env: dict[str, str], logs: Path, port: int | None) -> Child:
    log = open(logs / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it until it exits
    proc = subprocess.Popen([sys.executable, *args], env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
    return Child(name=name, proc=proc, port=port)


def _wait_ready(children: list[Child], *, timeout_s: float) -> list[str]:
    """Names of the services whose /readyz is not 200 when the timeout ends (empty = all ready)."""
    deadline = time.monotonic() + timeout_s
    pending = {c.name: c for c in children if c.port is not None}
    while pending and time.monotonic() < deadline:
        for name, child in list(pending.items()):
            if child.proc.poll() is not None:
                return [f"{name} exited with {child.proc.returncode}"]
            try:
                if httpx.get(f"http://127.0.0.1:{child.port}/readyz", timeout=1.0).status_code == 200:
                    del pending[name]
            except httpx.HTTPError:
                pass
        time.sleep(0.3)
    return sorted(pending)


def _stop(children: list[Child], broker: EmbeddedBroker | None) -> None:
    for child in children:
        if child.proc.poll() is None:
            child.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for child in children:
        try:
            child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait()
    if broker is not None:
        broker.stop()


def _env(base: dict[str, str], kafka: str, admin_key: str) -> dict[str, str]:
    env = dict(base)
    env.update({"KAFKA_BOOTSTRAP_SERVERS": kafka, "ADMIN_API_KEY": admin_key, "PYTHONUNBUFFERED": "1"})
    env.setdefault("ENVIRONMENT", "development")
    return env


def _start_children(env: dict[str, str], logs: Path, base_port: int, agent: bool) -> list[Child]:
    children = []
    schema_prefix = env.get("GPUCLOUD_SCHEMA_PREFIX", "")
    for offset, service in enumerate(SERVICES):
        port = base_port + offset
        child_env = {
            **env,
            f"{service.upper()}_HTTP_PORT": str(port),
            "DB_SCHEMA": f"{schema_prefix}{service}",
        }
        children.append(_spawn(service, ["-m", f"services.{service}"], child_env, logs, port))
    if agent:
        children.append(_spawn("agent", ["-m", "services.telemetry", "agent"], env, logs, None))
    return children


def _banner(children: list[Child], kafka: str, key_source: str, logs: Path, took_s: float) -> str:
    lines = ["", f"gpucloud is up (all /readyz 200 after {took_s:.1f}s):"]
    lines += [f"  {c.name:<10} http://127.0.0.1:{c.port}/docs" for c in children if c.port]
    lines += [
        f"  broker     {kafka}",
        f"  admin key  in {key_source}",
        f"  logs       {logs}/",
        "  next       see README.md 'Guided tour' (make demo); Ctrl-C stops everything",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the stack in the foreground until interrupted; returns the exit status."""
    parser = argparse.ArgumentParser(description="Run the whole gpucloud suite locally.")
    parser.add_argument("--base-port", type=int, default=int(os.environ.get("GPUCLOUD_BASE_PORT", BASE_PORT)))
    parser.add_argument("--broker-port", type=int, default=int(os.environ.get("GPUCLOUD_BROKER_PORT", 9092)))
    parser.add_argument("--run-dir", type=Path, default=Path(os.environ.get("GPUCLOUD_RUN_DIR", ".run")))
    parser.add_argument("--no-agent", action="store_true", help="do not start the simulated node agent")
    parser.add_argument("--ready-timeout", type=float, default=60.0)
    args = parser.parse_args(argv)

    args.run_dir.mkdir(parents=True, exist_ok=True)
    logs = args.run_dir / "logs"
    logs.mkdir(exist_ok=True)
    admin_key, key_source = _admin_key(args.run_dir)
    broker = None
    kafka = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not kafka:
        broker = EmbeddedBroker(port=args.broker_port, log_path=logs / "broker.log").start()
        kafka = broker.bootstrap
    env = _env(dict(os.environ), kafka, admin_key)
    dsn = env.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    schema_prefix = os.environ.get("GPUCLOUD_SCHEMA_PREFIX", "")
    for service in SERVICES:
        asyncio.run(
            migrate(dsn=dsn, schema=f"{schema_prefix}{service}", migrations=service_migrations(service))
        )

    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    started = time.monotonic()
    children = _start_children(env, logs, args.base_port, agent=not args.no_agent)
    try:
        not_ready = _wait_ready(children, timeout_s=args.ready_timeout)
        if not_ready:
            print(
                f"not ready after {args.ready_timeout:.0f}s: {', '.join(not_ready)}; see {logs}/",
                file=sys.stderr,
            )
            return 1
        print(_banner(children, kafka, key_source, logs, time.monotonic() - started), flush=True)
        while not stopping:
            for child in children:
                if child.proc.poll() is not None:
                    print(f"{child.name} exited with {child.proc.returncode}; stopping", file=sys.stderr)
                    return 1
            time.sleep(0.5)
        return 0
    finally:
        print("stopping...", flush=True)
        _stop(children, broker)


if __name__ == "__main__":
    sys.exit(main())
