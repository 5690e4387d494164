"""capacity, gpus and top: the pool in compute units, the GPUs it holds, and the caller's GPUs live."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from libs.gpuctl.commands._options import Tenant
from libs.gpuctl.render import Column, Format, Output, bar, console, emit, show, table, when
from libs.gpuctl.session import Session, session_of

__all__ = ["capacity_view", "gpus_view", "register", "top_view"]

_GIB = 1024**3
_GROUPINGS = ("pool", "model", "zone", "node", "gpu")


def register(root: typer.Typer) -> None:
    """Add capacity, gpus and top."""
    root.command()(capacity)
    root.command()(gpus)
    root.command()(top)


def _units(value: Any) -> str:
    return f"{Decimal(str(value)):.2f}"


def _capacity_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [{"by": "total", "name": "all", **data["total"]}]
    for grouping in _GROUPINGS:
        for name, figures in sorted((data.get(f"by_{grouping}") or {}).items()):
            rows.append({"by": grouping, "name": name, **figures})
    return rows


def capacity_view(data: dict[str, Any]) -> RenderableType:
    """Allocated compute units as a bar per group, with GPUs in use, free and unavailable."""
    columns = [
        Column("BY", lambda r: r["by"]),
        Column("NAME", lambda r: r["name"]),
        Column("UNITS ALLOCATED", lambda r: bar(r["allocated_units"], r["total_units"])),
        Column(
            "USED/TOTAL", lambda r: f"{_units(r['allocated_units'])}/{_units(r['total_units'])}", right=True
        ),
        Column("GPUS IN USE", lambda r: f"{r['in_use_gpus']}/{r['total_gpus']}", right=True),
        Column("FREE", lambda r: r["free_gpus"], right=True),
        Column("DOWN", lambda r: r["unavailable_gpus"], right=True),
    ]
    return table(_capacity_rows(data), columns)


def capacity(
    ctx: typer.Context,
    by: Annotated[str, typer.Option(help="Comma list of pool, model, zone, node, gpu.")] = "pool,model,zone",
    pool: Annotated[str | None, typer.Option(help="Only this pool.")] = None,
    zone: Annotated[str | None, typer.Option(help="Only this zone.")] = None,
    model: Annotated[str | None, typer.Option(help="Only this GPU model.")] = None,
    output: Output = Format.TABLE,
) -> None:
    """Compute units as bars by pool, model and zone.

    One compute unit is 1/8 of an A100.
    """
    client = session_of(ctx).client()
    params = {"group_by": by, "pool": pool, "zone": zone, "model": model}
    emit(client.get("inventory", "/v1/capacity", params), output, view=capacity_view)


def gpus_view(rows: list[dict[str, Any]]) -> RenderableType:
    """One line per GPU: where it is, its model, health, units and MIG (pool, zone, memory: -o json)."""
    columns = [
        Column("UUID", lambda r: r["uuid"]),
        Column("NODE", lambda r: r["node"]),
        Column("IDX", lambda r: r["index"], right=True),
        Column("MODEL", lambda r: r["model"]),
        Column("HEALTH", lambda r: r["health"]),
        Column("UNITS", lambda r: r["capacity_units"], right=True),
        Column("MIG", lambda r: r["mig_enabled"]),
    ]
    return table(rows, columns)


def gpus(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="Only this GPU model.")] = None,
    pool: Annotated[str | None, typer.Option(help="Only this pool.")] = None,
    zone: Annotated[str | None, typer.Option(help="Only this zone.")] = None,
    node: Annotated[str | None, typer.Option(help="Only this node.")] = None,
    health: Annotated[str | None, typer.Option(help="healthy, degraded, draining or failed.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 1000,
    output: Output = Format.TABLE,
) -> None:
    """The fleet's GPUs: node, model, health, units."""
    client = session_of(ctx).client()
    params = {"model": model, "pool": pool, "zone": zone, "node": node, "health": health, "limit": limit}
    emit(client.get("inventory", "/v1/gpus", params), output, view=gpus_view)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{float(value):.0f}%"


def _pcie(r: dict[str, Any]) -> str:
    tx, rx = r.get("pcie_tx_bytes_per_s"), r.get("pcie_rx_bytes_per_s")
    if tx is None and rx is None:
        return "-"
    return f"{(tx or 0) / 1e6:.0f}/{(rx or 0) / 1e6:.0f}"


def _fb(r: dict[str, Any]) -> str:
    used, total = r.get("fb_used_bytes"), r.get("fb_total_bytes")
    if used is None or not total:
        return "-"
    return f"{used / _GIB:.1f}/{total / _GIB:.0f} {100 * used / total:3.0f}%"


def _power(r: dict[str, Any]) -> str:
    if r.get("power_w") is None:
        return "-"
    limit = r.get("power_limit_w")
    return f"{r['power_w']:.0f}/{limit:.0f}" if limit else f"{r['power_w']:.0f}"


def top_view(rows: list[dict[str, Any]]) -> RenderableType:
    """The caller's GPUs now: compute (SM), memory and transfer (PCIe tx/rx) use, framebuffer, heat, power."""
    columns = [
        Column("NODE", lambda r: r["node"]),
        Column("IDX", lambda r: r["index"], right=True),
        Column("SM", lambda r: _pct(r.get("sm_util_pct")), right=True),
        Column("MEM", lambda r: _pct(r.get("mem_util_pct")), right=True),
        Column("PCIE MB/s", _pcie, right=True),
        Column("FB GiB", _fb, right=True),
        Column("TEMP°C", lambda r: r.get("gpu_temp_c"), right=True),
        Column("POWER W", _power, right=True),
        Column("WORKLOAD", lambda r: "LOST" if r.get("lost_reason") else r.get("workload_id")),
    ]
    newest = max((r["at"] for r in rows), default=None)
    caption = Text(
        f"{len(rows)} GPU(s), sampled {when(newest)} UTC" if newest else "no GPUs visible to this key"
    )
    return Group(table(rows, columns), caption)


def _live(session: Session, fetch: Callable[[], list[dict[str, Any]]], interval: float) -> None:
    out = console()
    if not out.is_terminal:  # a pipe gets one table per refresh, like top -b
        while True:
            show(top_view(fetch()), out=out)
            session.sleep(interval)
    with Live(top_view(fetch()), console=out, auto_refresh=False, transient=False) as live:
        while True:
            session.sleep(interval)
            live.update(top_view(fetch()), refresh=True)


def top(
    ctx: typer.Context,
    node: Annotated[str | None, typer.Option(help="Only this node's GPUs.")] = None,
    tenant: Tenant = None,
    interval: Annotated[float, typer.Option(help="Seconds between refreshes.", min=0.2)] = 1.0,
    once: Annotated[bool, typer.Option("--once", help="Print one table and exit.")] = False,
    output: Output = Format.TABLE,
) -> None:
    """Your GPUs live, every second (Ctrl-C ends it)."""
    session = session_of(ctx)
    client = session.client()

    def fetch() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = client.get(
            "telemetry", "/v1/gpus/latest", {"node": node, "tenant": tenant}
        )
        return rows

    if once or output is not Format.TABLE:
        emit(fetch(), output, view=top_view)
        return
    try:
        _live(session, fetch, interval)
    except KeyboardInterrupt:
        return
