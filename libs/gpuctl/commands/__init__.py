"""One module per noun; each adds its commands to the root app, in the order ``gpuctl --help`` lists them."""

from __future__ import annotations

from collections.abc import Callable

import typer

from libs.gpuctl.commands import (
    admin,
    advice,
    alerts,
    billing,
    contexts,
    drafts,
    fleet,
    incidents,
    results,
    rules,
    tasks,
    workloads,
)

__all__ = ["REGISTRARS"]

REGISTRARS: tuple[Callable[[typer.Typer], None], ...] = (
    contexts.register,
    fleet.register,
    drafts.register,
    workloads.register,
    results.register,
    tasks.register,
    advice.register,
    alerts.register,
    rules.register,
    incidents.register,
    billing.register,
    admin.register,
)
