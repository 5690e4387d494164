"""python -m services.telemetry: the aggregator service; `python -m services.telemetry agent`: the agent."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys

from libs.common.observability import setup_logging
from libs.common.serve import serve
from services.telemetry.settings import TelemetrySettings


async def _run_agent(settings: TelemetrySettings) -> None:
    from services.telemetry.agent.process import NodeAgent, utc_now
    from services.telemetry.agent.setup import resolve_setup

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    setup = await resolve_setup(settings=settings, clock=utc_now)
    _freeze_startup_heap()
    await NodeAgent(settings=settings, setup=setup).run(stop)


def _freeze_startup_heap() -> None:
    """Keep what start-up built (modules, the app, a simulated fleet) out of later collections: it
    lives as long as the process, and each full collection rescanned all of it (tens of ms at fleet
    scale, a pause every sample waiting at that moment pays)."""
    gc.collect()
    gc.freeze()


def main(argv: list[str]) -> None:
    """Dispatch on the first argument: none = aggregator, `agent` = node agent."""
    settings = TelemetrySettings()
    if argv and argv[0] == "agent":
        setup_logging(service="telemetry-agent", level=settings.log_level, json_lines=settings.log_json)
        asyncio.run(_run_agent(settings))
    elif not argv:
        from services.telemetry.app import create_app

        app = create_app(settings)
        _freeze_startup_heap()
        serve(app, settings)
    else:
        sys.exit(f"usage: python -m services.telemetry [agent] (got {' '.join(argv)!r})")


if __name__ == "__main__":
    main(sys.argv[1:])
