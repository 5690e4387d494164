"""gpuctl run in-process against a fake of the services' HTTP (httpx.MockTransport), at a fixed width."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from libs.gpuctl.app import main
from libs.gpuctl.config import DEFAULT_BASE_PORT, SERVICES, Config, Context, save
from libs.gpuctl.session import Session

HOST = "http://gpucloud.test"
KEY = "gck_kfeed01_not-a-real-secret"
#: The wall clock of every run: the samples' timestamps are a few minutes before it.
NOW = datetime(2026, 12, 2, 3, 40, tzinfo=UTC)
Answer = httpx.Response | Callable[[httpx.Request], httpx.Response]


def error(status: int, code: str, message: str, field: str | None = None) -> httpx.Response:
    """A response in the services' error shape."""
    body = {"error": {"status": status, "code": code, "message": message, "field": field, "details": None}}
    return httpx.Response(status, json=body)


@dataclass
class FakeApi:
    """Answers by (method, service, path); records every request it saw."""

    answers: dict[tuple[str, str, str], list[Answer]] = field(default_factory=dict)
    seen: list[httpx.Request] = field(default_factory=list)

    def on(self, method: str, service: str, path: str, *answers: Answer | Any) -> None:
        """Queue answers; a plain value is a 200 JSON body; the last answer repeats."""
        queued = [
            a if isinstance(a, httpx.Response) or callable(a) else httpx.Response(200, json=a)
            for a in answers
        ]
        self.answers[(method, service, path)] = queued

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        service = SERVICES[(request.url.port or 0) - DEFAULT_BASE_PORT]
        queued = self.answers.get((request.method, service, request.url.path))
        if not queued:
            return error(404, "not_found", f"the fake has no {request.method} {service} {request.url.path}")
        answer = queued.pop(0) if len(queued) > 1 else queued[0]
        return answer(request) if callable(answer) and not isinstance(answer, httpx.Response) else answer

    def requests(self, method: str, path: str) -> list[httpx.Request]:
        """The requests seen to one path."""
        return [r for r in self.seen if r.method == method and r.url.path == path]

    def body(self, method: str, path: str) -> Any:
        """The JSON body of the last request to one path."""
        return json.loads(self.requests(method, path)[-1].content)


@dataclass(frozen=True)
class Result:
    """One run: exit code, stdout, stderr."""

    code: int
    out: str
    err: str


@dataclass
class Cli:
    """Runs ``gpuctl ARGS`` in-process with the fake API, a config of its own and no terminal."""

    api: FakeApi
    config: Path
    capsys: pytest.CaptureFixture[str]
    monkeypatch: pytest.MonkeyPatch
    interactive: bool = False
    clock: list[float] = field(default_factory=lambda: [0.0])

    def __call__(self, *args: str, stdin: str = "") -> Result:
        self.capsys.readouterr()
        self.monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        session = Session(
            path=self.config,
            transport=httpx.MockTransport(self.api.handle),
            interactive=lambda: self.interactive,
            sleep=self._sleep,
            clock=lambda: self.clock[0],
            now=lambda: NOW,
        )
        code = main(list(args), session=session)
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def _sleep(self, seconds: float) -> None:
        self.clock[0] += seconds


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def cli(
    api: FakeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Cli:
    """A logged-in tenant context at COLUMNS=100, with GPUCTL_* and NO_COLOR cleared."""
    for name in ("GPUCTL_API_KEY", "GPUCTL_CONTEXT", "NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    config = tmp_path / "gpuctl" / "config.yaml"
    save(Config().with_context("test", Context(url=HOST, api_key=KEY, tenant="acme")), config)
    return Cli(api=api, config=config, capsys=capsys, monkeypatch=monkeypatch)
