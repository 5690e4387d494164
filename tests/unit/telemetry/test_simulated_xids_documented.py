"""Every XID the simulator accepts is in docs/telemetry.md, with whether it ends the workload."""

from __future__ import annotations

import re
from pathlib import Path

from services.telemetry.adapters.sim.faults import SIMULATED_XIDS, WORKLOAD_FATAL_XIDS

DOC = Path(__file__).resolve().parents[3] / "docs" / "telemetry.md"


def test_the_docs_table_lists_exactly_the_simulated_xids_and_which_are_fatal() -> None:
    section = DOC.read_text(encoding="utf-8").split("### Simulated XIDs", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| [^|]+ \| (fatal|runs on) \|$", section, flags=re.MULTILINE)

    assert [int(x) for x, _ in rows] == list(SIMULATED_XIDS)
    assert {int(x) for x, fate in rows if fate == "fatal"} == set(WORKLOAD_FATAL_XIDS)
