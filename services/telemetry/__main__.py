"""python -m services.telemetry: the aggregator service; `python -m services.telemetry agent`: the agent."""

from __future__ import annotations

import asyncio
import signal
import sys

from libs.common.heap import freeze_startup_heap
from libs.common.observability import setup_logging
from libs.common.serve import serve
from services.telemetry.settings import TelemetrySettings


async def _run_agent(settings: TelemetrySettings) -> None:
    from services.telemetry.service.agent.process import NodeAgent, utc_now
    from services.telemetry.service.agent.setup import resolve_setup

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    setup = await resolve_setup(settings=settings, clock=utc_now)
    freeze_startup_heap()
    await NodeAgent(settings=settings, setup=setup).run(stop)


def main(argv: list[str]) -> None:
    """Dispatch on the first argument: none = aggregator, `agent` = node agent."""
    settings = TelemetrySettings()
    if argv and argv[0] == "agent":
        setup_logging(service="telemetry-agent", level=settings.log_level, json_lines=settings.log_json)
        asyncio.run(_run_agent(settings))
    elif not argv:
        from services.telemetry.app import create_app

        serve(create_app(settings), settings)  # the app freezes its heap once it has started
    else:
        sys.exit(f"usage: python -m services.telemetry [agent] (got {' '.join(argv)!r})")


if __name__ == "__main__":
    main(sys.argv[1:])
