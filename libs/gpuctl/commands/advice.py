"""recommend and predict: the GPU to ask for, and how long a job will take, from the tenant's history."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.text import Text

from libs.gpuctl.commands._options import Tenant
from libs.gpuctl.render import Format, Output, emit, fields
from libs.gpuctl.session import session_of

__all__ = ["duration_text", "predict_view", "recommend_view", "register"]

Framework = Annotated[str | None, typer.Option(help="Image or framework, e.g. pytorch.")]


def register(root: typer.Typer) -> None:
    """Add recommend and predict."""
    root.command()(recommend)
    root.command()(predict)


def duration_text(seconds: Any) -> str:
    """``1h 05m``, ``12m 30s``, ``45s``; '-' for unknown."""
    if seconds is None:
        return "-"
    s = round(float(seconds))
    hours, rest = divmod(s, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _reasons(reasons: list[str]) -> list[Text]:
    return [Text(f"  - {r}") for r in reasons]


def recommend_view(r: dict[str, Any]) -> RenderableType:
    """The model and count to ask for, then why."""
    summary = fields(
        [
            ("Recommended", f"{r['count']}x {r['model']}" if r.get("model") else "nothing in the fleet fits"),
            ("Memory need", f"{r['memory_need_gb']} GB"),
            ("Expected duration", duration_text(r.get("expected_duration_s"))),
            ("Similar jobs", r.get("similar_jobs")),
            ("Healthy GPUs", r.get("fleet_gpus")),
        ]
    )
    return Group(summary, Text("Why:"), *_reasons(r.get("reasons") or []))


def recommend(
    ctx: typer.Context,
    framework: Framework = None,
    params_b: Annotated[float | None, typer.Option(help="Model size, billions of parameters.")] = None,
    memory_gb: Annotated[float | None, typer.Option(help="GPU memory the job needs, GB.")] = None,
    mode: Annotated[str, typer.Option(help="training or inference.")] = "training",
    deadline_h: Annotated[float | None, typer.Option(help="Finish within this many hours.")] = None,
    tenant: Tenant = None,
    output: Output = Format.TABLE,
) -> None:
    """The GPU model and count to ask for."""
    client = session_of(ctx).client()
    params = {
        "framework": framework,
        "model_size_b": params_b,
        "memory_gb": memory_gb,
        "mode": mode,
        "deadline_h": deadline_h,
        "tenant_id": tenant,
    }
    emit(client.get("scheduler", "/v1/recommendations/gpu", params), output, view=recommend_view)


def predict_view(p: dict[str, Any]) -> RenderableType:
    """The median and 90th-percentile duration, then why."""
    summary = fields(
        [
            ("Median (p50)", duration_text(p.get("p50_s"))),
            ("p90", duration_text(p.get("p90_s"))),
            ("Samples", p.get("samples")),
        ]
    )
    return Group(summary, Text("Why:"), *_reasons(p.get("reasons") or []))


def predict(
    ctx: typer.Context,
    framework: Framework = None,
    model: Annotated[str | None, typer.Option(help="GPU model, e.g. A100-80GB.")] = None,
    tenant: Tenant = None,
    output: Output = Format.TABLE,
) -> None:
    """How long a job will run, from your history."""
    client = session_of(ctx).client()
    params = {"framework": framework, "model": model, "tenant_id": tenant}
    emit(client.get("scheduler", "/v1/predictions/duration", params), output, view=predict_view)
