"""The layering rules, keyed on folders: where a module lives says what it may import.

A service is ``services/<name>/`` with wiring modules at its top and four layers below:

- ``domain/``: pure rules and models. The standard library (less its IO, clock and process modules),
  pydantic, promql_parser (a pure parser), and the service's own domain. No clock reads, no fresh ids.
- ``service/``: use cases, handlers and loops. Its own domain, service and adapters, and ``libs``; no HTTP
  framework and no driver.
- ``adapters/``: stores, Redis, hosts and external systems. Its own domain and adapters, ``libs`` and the
  drivers; never the service or api layers above it.
- ``api/``: routers, schemas and the error map. Its own domain, service, adapters (read queries) and api,
  the HTTP framework and ``libs``; no driver.
- wiring (``__init__``, ``__main__``, ``app``, ``settings``, ``deps``): anything of its own service.

Everywhere: a service never imports another service, and ``libs.common`` imports no service and no
development tool (``libs.devkit``).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LAYERS = ("domain", "service", "adapters", "api")
WIRING = frozenset({"__init__.py", "__main__.py", "app.py", "settings.py", "deps.py"})
#: Folders beside the layers that hold no Python (SQL schema migrations).
DATA_FOLDERS = frozenset({"migrations"})

DRIVERS = frozenset({"asyncpg", "redis", "aiokafka", "httpx", "pynvml", "pyarrow", "uvicorn"})
HTTP = frozenset({"fastapi", "starlette", "sse_starlette"})
#: Standard-library modules a pure domain may not use: IO, processes, threads, the clock, randomness.
IMPURE_STDLIB = frozenset(
    {
        "asyncio", "os", "socket", "subprocess", "time", "threading", "multiprocessing", "shutil",
        "tempfile", "sqlite3", "http", "urllib", "ssl", "signal", "select", "selectors", "secrets",
        "logging", "io", "glob", "importlib", "concurrent", "uuid", "random",
    }
)  # fmt: skip
#: promql_parser: a pure parser (Rust, no IO), so alerting's domain can read PromQL as Prometheus does.
DOMAIN_THIRD_PARTY = frozenset({"pydantic", "pydantic_core", "typing_extensions", "promql_parser"})
CLOCK_CALLS = frozenset({"now", "utcnow", "today", "monotonic", "perf_counter", "time_ns"})
ID_CALLS = frozenset({"uuid1", "uuid4", "token_hex", "token_bytes", "token_urlsafe"})

#: What each layer may import of its own service.
OWN_LAYERS: dict[str, frozenset[str]] = {
    "domain": frozenset({"domain"}),
    "service": frozenset({"domain", "service", "adapters"}),
    "adapters": frozenset({"domain", "adapters"}),
    "api": frozenset({"domain", "service", "adapters", "api"}),
    "wiring": frozenset({"domain", "service", "adapters", "api", "wiring"}),
}


@dataclass(frozen=True, slots=True)
class Violation:
    """One forbidden import (or call) in one file."""

    path: str
    line: int
    what: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what} ({self.why})"


def layer_of(path: Path, service_root: Path) -> str | None:
    """The layer a module of a service belongs to, or None when it lives outside every layer."""
    parts = path.relative_to(service_root).parts
    if len(parts) == 1:
        return "wiring" if parts[0] in WIRING else None
    return parts[0] if parts[0] in LAYERS else None


def _imports(tree: ast.AST, package: str) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level]
                yield node.lineno, ".".join([*base, node.module] if node.module else base)
            elif node.module:
                yield node.lineno, node.module


def _calls(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            yield node.lineno, name


def _own_layer(module: str, service: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 3:
        return "wiring"
    head = parts[2]
    return head if head in LAYERS else "wiring"


def check_import(*, layer: str, service: str, module: str) -> str | None:
    """Why ``module`` may not be imported from ``layer`` of ``service``, or None when it may."""
    root = module.split(".")[0]
    if root == "services":
        other = module.split(".")[1] if module.count(".") else ""
        if other and other != service:
            return f"a service never imports another service (services.{other})"
        own = _own_layer(module, service)
        if own not in OWN_LAYERS[layer]:
            return f"the {layer} layer may not import the {own} layer"
        return None
    if layer == "domain":
        if root in DOMAIN_THIRD_PARTY or root == "__future__":
            return None
        if root in sys.stdlib_module_names:
            return f"the domain is pure: no {root}" if root in IMPURE_STDLIB else None
        return f"the domain imports only the standard library, pydantic, promql_parser and itself, not {root}"
    if root in DRIVERS and layer not in {"adapters", "wiring"}:
        return f"only adapters (and the wiring) touch the driver {root}"
    if root in HTTP and layer not in {"api", "wiring"}:
        return f"only the api layer (and the wiring) knows HTTP ({root})"
    return None


def check_service_file(path: Path, service_root: Path) -> list[Violation]:
    """Every rule broken by one module of a service."""
    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    service = service_root.name
    layer = layer_of(path, service_root)
    if layer is None:
        return [Violation(rel, 1, "module outside every layer", f"move it under one of {', '.join(LAYERS)}")]
    package = ".".join(["services", service, *path.relative_to(service_root).with_suffix("").parts])
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__") + ".__init__"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
    found = [
        Violation(rel, line, f"import {module}", why)
        for line, module in _imports(tree, package)
        if (why := check_import(layer=layer, service=service, module=module))
    ]
    if layer == "domain":
        for line, name in _calls(tree):
            if name in CLOCK_CALLS:
                found.append(Violation(rel, line, f"call {name}()", "the domain reads no clock"))
            elif name in ID_CALLS:
                found.append(Violation(rel, line, f"call {name}()", "the domain makes no fresh ids"))
    return found


def check_service_tree(service_root: Path) -> list[Violation]:
    """Every rule broken anywhere in one service, including folders outside the layers."""
    found: list[Violation] = []
    for child in sorted(service_root.iterdir()):
        if child.is_dir() and child.name not in (*LAYERS, *DATA_FOLDERS, "__pycache__"):
            rel = child.relative_to(ROOT) if child.is_relative_to(ROOT) else child
            found.append(Violation(str(rel), 1, "folder outside every layer", f"use {', '.join(LAYERS)}"))
    for path in sorted(service_root.rglob("*.py")):
        if "__pycache__" not in path.parts:
            found.extend(check_service_file(path, service_root))
    return found


def check_library_file(path: Path) -> list[Violation]:
    """``libs.common`` imports no service and no development tool."""
    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    package = ".".join(Path(rel).with_suffix("").parts)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
    found = []
    for line, module in _imports(tree, package):
        if module.split(".")[0] == "services":
            found.append(Violation(rel, line, f"import {module}", "the runtime library imports no service"))
        elif module.startswith("libs.devkit"):
            why = "the runtime library imports no development tool"
            found.append(Violation(rel, line, f"import {module}", why))
    return found
