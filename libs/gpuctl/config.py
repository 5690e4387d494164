"""Login contexts: where each installation's services are and the key to use, kept in a 0600 YAML file.

The file is ``$XDG_CONFIG_HOME/gpuctl/config.yaml`` (``~/.config/gpuctl/config.yaml`` without it). The
``--context`` flag, then ``GPUCTL_CONTEXT``, then the file's ``current-context`` choose the context;
``GPUCTL_API_KEY`` wins over the context's stored key, so a script or CI job needs no file at all.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from libs.gpuctl.client import ExitCode, GpuctlError

__all__ = [
    "CONTEXT_ENV",
    "DEFAULT_BASE_PORT",
    "DEFAULT_URL",
    "KEY_ENV",
    "SERVICES",
    "Config",
    "Context",
    "Target",
    "check_url",
    "config_path",
    "load",
    "resolve",
    "save",
]

#: The services in the order of their default ports (8001...8006), as ``make run`` starts them.
SERVICES = ("inventory", "scheduler", "telemetry", "alerting", "billing", "recovery")
DEFAULT_URL = "http://127.0.0.1"
DEFAULT_BASE_PORT = 8001
KEY_ENV, CONTEXT_ENV = "GPUCTL_API_KEY", "GPUCTL_CONTEXT"


@dataclass(frozen=True)
class Context:
    """One installation: a host whose services listen on consecutive ports, or one URL per service."""

    url: str = DEFAULT_URL
    base_port: int = DEFAULT_BASE_PORT
    api_key: str | None = None
    tenant: str | None = None
    services: Mapping[str, str] = field(default_factory=dict)

    def service_url(self, service: str) -> str:
        """The base URL of one service in this installation."""
        if service in self.services:
            return self.services[service].rstrip("/")
        return f"{self.url.rstrip('/')}:{self.base_port + SERVICES.index(service)}"

    def to_yaml(self) -> dict[str, Any]:
        """The context as the file stores it (only what differs from the defaults, besides the URL)."""
        out: dict[str, Any] = {"url": self.url}
        if self.base_port != DEFAULT_BASE_PORT:
            out["base-port"] = self.base_port
        if self.api_key is not None:
            out["api-key"] = self.api_key
        if self.tenant is not None:
            out["tenant"] = self.tenant
        if self.services:
            out["services"] = dict(sorted(self.services.items()))
        return out

    @classmethod
    def from_yaml(cls, name: str, raw: Any) -> Context:
        """A context read from the file; a malformed one is named in the error."""
        if not isinstance(raw, dict):
            raise _bad_file(f"context {name!r} is not a mapping")
        services = raw.get("services") or {}
        if not isinstance(services, dict) or set(services) - set(SERVICES):
            raise _bad_file(f"context {name!r}: services must map {', '.join(SERVICES)} to URLs")
        try:
            return cls(
                url=str(raw.get("url", DEFAULT_URL)),
                base_port=int(raw.get("base-port", DEFAULT_BASE_PORT)),
                api_key=_optional_str(raw.get("api-key")),
                tenant=_optional_str(raw.get("tenant")),
                services={str(k): str(v) for k, v in services.items()},
            )
        except (TypeError, ValueError) as exc:
            raise _bad_file(f"context {name!r}: {exc}") from None


@dataclass(frozen=True)
class Config:
    """Every context, and the one used when none is named."""

    contexts: Mapping[str, Context] = field(default_factory=dict)
    current: str | None = None

    def with_context(self, name: str, context: Context, *, make_current: bool = True) -> Config:
        """This config with ``name`` added or replaced (and made current)."""
        contexts = {**self.contexts, name: context}
        return replace(self, contexts=contexts, current=name if make_current else self.current)

    def without(self, name: str) -> Config:
        """This config with ``name`` removed (current cleared if it was that one)."""
        contexts = {k: v for k, v in self.contexts.items() if k != name}
        return replace(self, contexts=contexts, current=None if self.current == name else self.current)


@dataclass(frozen=True)
class Target:
    """What a command talks to: the context's name (None: the defaults) and its effective settings."""

    name: str | None
    context: Context
    key_from_env: bool


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the config file lives: under $XDG_CONFIG_HOME, else ~/.config."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpuctl" / "config.yaml"


def load(path: Path) -> Config:
    """The config at ``path`` (empty when there is none yet)."""
    if not path.exists():
        return Config()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise _bad_file(f"{path} is not YAML: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("contexts") or {}, dict):
        raise _bad_file(f"{path}: expected 'contexts:' mapping names to contexts")
    contexts = {str(n): Context.from_yaml(str(n), c) for n, c in (raw.get("contexts") or {}).items()}
    return Config(contexts=contexts, current=_optional_str(raw.get("current-context")))


def save(config: Config, path: Path) -> None:
    """Write the config readable by its owner only (0600), atomically; the folder is 0700."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    body = {
        "current-context": config.current,
        "contexts": {name: c.to_yaml() for name, c in sorted(config.contexts.items())},
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".yaml")  # mkstemp makes it 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yaml.safe_dump(body, out, sort_keys=False)
        os.chmod(tmp, stat.S_IRUSR | stat.S_IWUSR)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def resolve(config: Config, *, flag: str | None, environ: Mapping[str, str] | None = None) -> Target:
    """The context a command uses (flag, then GPUCTL_CONTEXT, then current), with GPUCTL_API_KEY applied."""
    env = os.environ if environ is None else environ
    named = flag or env.get(CONTEXT_ENV) or None
    if named is not None and named not in config.contexts:
        known = ", ".join(sorted(config.contexts)) or "none yet (gpuctl login)"
        raise GpuctlError(f"no context {named!r}; known: {known}", exit_code=ExitCode.USAGE, field="context")
    name = named or (config.current if config.current in config.contexts else None)
    context = config.contexts[name] if name is not None else Context()
    env_key = env.get(KEY_ENV) or None
    if env_key is not None:
        context = replace(context, api_key=env_key)
    return Target(name=name, context=context, key_from_env=env_key is not None)


def check_url(url: str) -> str:
    """A context URL: http(s)://host, without a port or path (ports come from --base-port or --service)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GpuctlError(f"{url!r} is not an http(s) URL", exit_code=ExitCode.USAGE, field="url")
    if parts.port is not None or parts.path.strip("/") or parts.query:
        raise GpuctlError(
            f"{url!r}: give only the scheme and host; ports come from --base-port or --service",
            exit_code=ExitCode.USAGE,
            field="url",
        )
    return f"{parts.scheme}://{parts.netloc}"


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _bad_file(message: str) -> GpuctlError:
    return GpuctlError(f"config: {message}", exit_code=ExitCode.USAGE, field="config")
