"""Real-hardware check of the NVML path.

Run as `python -m services.telemetry.adapters.nvml_check --seconds 60 --interval 1`. Prints JSON lines:
the discovery, then every sample and XID event, then a summary. Exits 2 with one line on stderr when
NVML is not usable on this host.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from services.telemetry.adapters.nvml_probe import NvmlProbe, NvmlUnavailable
from services.telemetry.domain.metrics import GpuSample

__all__ = ["main", "run_check"]


def _emit(record: dict[str, object]) -> None:
    print(json.dumps(record, default=str), flush=True)


async def run_check(*, seconds: float, interval: float) -> dict[str, object]:
    """Discover, sample for `seconds`, and return the summary."""
    probe = NvmlProbe()
    try:
        discovery = await probe.discover()
        _emit({"type": "discovery", **discovery.model_dump(mode="json")})
        samples = lost = xids = 0
        unsupported: set[str] = set()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            for reading in await probe.sample():
                _emit({"type": reading.kind, **reading.model_dump(mode="json", exclude={"kind"})})
                samples += isinstance(reading, GpuSample)
                lost += not isinstance(reading, GpuSample)
                if isinstance(reading, GpuSample):
                    unsupported.update(reading.unsupported())
            for event in await probe.poll_xids():
                xids += 1
                _emit({"type": "xid", **event.model_dump(mode="json")})
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
        stats = probe.stats
        return {
            "type": "summary",
            "gpus": len(discovery.gpus),
            "samples_taken": samples,
            "lost_readings": lost,
            "xid_events": xids,
            "fields_unsupported": sorted(unsupported),
            "unsupported_calls": dict(stats.unsupported),
            "errors": dict(stats.errors),
        }
    finally:
        await probe.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    try:
        summary = asyncio.run(run_check(seconds=args.seconds, interval=args.interval))
    except NvmlUnavailable as exc:
        print(f"nvml_check: no usable NVIDIA GPU here ({exc})", file=sys.stderr)
        return 2
    _emit(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
