"""A PgBouncer in transaction mode in front of a Postgres, one database entry per service schema.

What README.md ('Behind PgBouncer') asks of a deployment, started from Debian's ``pgbouncer`` binary
for the tests and for trying it locally: each schema gets a database entry ``gpucloud_<schema>`` whose
``connect_query`` sets ``search_path`` (a transaction pooler keeps no session state of a client, and
PgBouncer 1.18 refuses ``search_path`` in a start-up packet), so one
``DATABASE_URL=postgresql://user@host:port/gpucloud_{schema}`` serves every service.

    python -m libs.devkit.pgbouncer --port 6432 scheduler inventory ...   # prints the URL, runs until ^C
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from libs.common.db.pool import QUEUE_READS
from libs.devkit.broker import free_port

__all__ = ["PgBouncer", "PgBouncerUnavailable", "alias", "resolve_binary"]


class PgBouncerUnavailable(RuntimeError):
    """No pgbouncer binary here, or it did not start."""


def resolve_binary() -> str:
    """Path of the pgbouncer binary (on PATH, or Debian's /usr/sbin/pgbouncer)."""
    found = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None
    )
    if found is None:
        raise PgBouncerUnavailable("pgbouncer is not installed (make pgbouncer installs Debian's)")
    return found


def alias(schema: str) -> str:
    """The database entry a service with ``schema`` connects to."""
    return f"gpucloud_{schema}"


def _connect_query(schema: str, *, queue_reads: bool) -> str:
    settings = [f"SET search_path TO {schema}, public"]
    if queue_reads:  # the scheduler's queue reads (libs/common/db/pool.py), set per server connection
        settings += [f"SET {name} TO {value}" for name, value in QUEUE_READS.items()]
    return "; ".join(settings)


class PgBouncer:
    """``with PgBouncer(postgres_url, schemas) as bouncer:`` runs one until the block ends.

    ``pool_size`` is each entry's ``default_pool_size``: the most server connections a service's pooled
    connections share, whatever its own pools' sizes.
    """

    def __init__(
        self,
        postgres_url: str,
        schemas: list[str],
        *,
        port: int | None = None,
        pool_size: int = 5,
        queue_reads: tuple[str, ...] = (),
    ) -> None:
        self.port = port or free_port()
        self._target = urlsplit(postgres_url)
        self._schemas = schemas
        self._pool_size = pool_size
        self._queue_reads = queue_reads
        self._dir = Path(tempfile.mkdtemp(prefix="gpucloud-pgbouncer-"))
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """DATABASE_URL for every service behind it ('{schema}' left for each service to fill in)."""
        user = self._target.username or "postgres"
        return f"postgresql://{user}@127.0.0.1:{self.port}/{alias('{schema}')}"

    @property
    def log_path(self) -> Path:
        return self._dir / "pgbouncer.log"

    def config(self) -> str:
        host = self._target.hostname or "127.0.0.1"
        port = self._target.port or 5432
        user = self._target.username or "postgres"
        database = (self._target.path or "/postgres").lstrip("/") or "postgres"
        password = f" password={self._target.password}" if self._target.password else ""
        entries = [
            f"{alias(schema)} = host={host} port={port} dbname={database} user={user}{password} "
            f"connect_query='{_connect_query(schema, queue_reads=schema in self._queue_reads)}'"
            for schema in self._schemas
        ]
        return "\n".join(
            [
                "[databases]",
                *entries,
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {self._dir / 'users.txt'}",
                "pool_mode = transaction",
                "max_client_conn = 1000",
                f"default_pool_size = {self._pool_size}",
                f"logfile = {self.log_path}",
                f"pidfile = {self._dir / 'pgbouncer.pid'}",
                f"admin_users = {user}",
                f"stats_users = {user}",
                "",
            ]
        )

    def __enter__(self) -> PgBouncer:
        binary = resolve_binary()
        user = self._target.username or "postgres"
        (self._dir / "users.txt").write_text(f'"{user}" ""\n')
        (self._dir / "pgbouncer.ini").write_text(self.config())
        args = [binary, str(self._dir / "pgbouncer.ini")]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root: it drops to an unprivileged user
            self._dir.chmod(0o777)
            for path in self._dir.iterdir():
                path.chmod(0o666)
            args[1:1] = ["-u", "postgres" if _user_exists("postgres") else "nobody"]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # noqa: S603
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                raise PgBouncerUnavailable(
                    f"pgbouncer exited with {self._proc.returncode}: {err}{self._log()}"
                )
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        self.__exit__(None, None, None)
        raise PgBouncerUnavailable(f"pgbouncer did not listen on {self.port} within 10 s{self._log()}")

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def show(self, what: str) -> list[dict[str, str]]:
        """``SHOW <what>`` on the admin console (POOLS, CLIENTS, SERVERS), as rows of column -> text.

        The console speaks only the simple query protocol, so this asks through psql.
        """
        user = self._target.username or "postgres"
        psql = shutil.which("psql") or "psql"
        argv = [psql, "-h", "127.0.0.1", "-p", str(self.port), "-U", user, "-d", "pgbouncer"]
        out = subprocess.run(  # noqa: S603
            [*argv, "-A", "-F", "\t", "-P", "footer=off", "-c", f"SHOW {what}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.splitlines()
        header, *rows = (line.split("\t") for line in out)
        return [dict(zip(header, row, strict=True)) for row in rows]

    def _log(self) -> str:
        try:
            return "\n" + self.log_path.read_text()[-2000:]
        except OSError:
            return ""


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description="Run a PgBouncer in transaction mode for the given schemas.")
    parser.add_argument(
        "--postgres", default=os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    parser.add_argument("--port", type=int, default=6432)
    parser.add_argument("--pool-size", type=int, default=5)
    parser.add_argument("schemas", nargs="+")
    args = parser.parse_args()
    with PgBouncer(args.postgres, args.schemas, port=args.port, pool_size=args.pool_size) as bouncer:
        print(f"DATABASE_POOLER=transaction DATABASE_URL={bouncer.url} DATABASE_DIRECT_URL={args.postgres}")
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
