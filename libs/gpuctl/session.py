"""What every command reaches: the config file, the chosen context, the client, --quiet, the terminal.

The session hangs on the root Typer context (``ctx.obj``); tests pass their own with a fake transport,
a config path of their own and no terminal, so a command runs the same code as on a user's machine.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import typer

from libs.gpuctl.client import ApiClient
from libs.gpuctl.config import Config, Context, Target, config_path, load, resolve
from libs.gpuctl.render import console

__all__ = ["Session", "session_of"]


def _terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


@dataclass
class Session:
    """One invocation's settings and the client it opened (closed by ``close``)."""

    path: Path | None = None
    context_flag: str | None = None
    quiet: bool = False
    transport: httpx.BaseTransport | None = None
    interactive: Callable[[], bool] = _terminal
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    _clients: list[ApiClient] = field(default_factory=list)

    def config_file(self) -> Path:
        """The config file this invocation reads and writes."""
        return self.path or config_path()

    def config(self) -> Config:
        """The config as stored now."""
        return load(self.config_file())

    def target(self) -> Target:
        """The context commands talk to (flag, GPUCTL_CONTEXT, current; GPUCTL_API_KEY applied)."""
        return resolve(self.config(), flag=self.context_flag)

    def client(self, context: Context | None = None) -> ApiClient:
        """A client of ``context`` (default: the resolved target's)."""
        made = ApiClient(context=context or self.target().context, transport=self.transport)
        self._clients.append(made)
        return made

    def note(self, message: str) -> None:
        """A line for a person (stderr), silenced by --quiet."""
        if not self.quiet:
            console(stderr=True).print(message)

    def close(self) -> None:
        """Close every client this session opened."""
        for made in self._clients:
            made.close()
        self._clients.clear()


def session_of(ctx: typer.Context) -> Session:
    """The session of this invocation (made by the root callback)."""
    root = ctx.find_root()
    if not isinstance(root.obj, Session):
        root.obj = Session()
    return root.obj
