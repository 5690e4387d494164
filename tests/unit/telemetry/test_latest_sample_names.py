"""The latest sample names framebuffer use as rules, rollups and exposition do: fb_used_pct."""

from __future__ import annotations

from datetime import UTC, datetime

from services.telemetry.api.views import latest

RAW = {
    "gpu": "GPU-1",
    "index": 0,
    "model": "H100-80GB-SXM",
    "node": "n1",
    "at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
    "fb_used_bytes": 60,
    "fb_total_bytes": 80,
}


def test_the_api_answers_fb_used_pct_and_keeps_the_old_name_as_a_deprecated_copy() -> None:
    shown = latest(RAW).model_dump(mode="json")

    assert shown["fb_used_pct"] == 75.0
    assert shown["fb_used_percent"] == 75.0


def test_a_sample_without_framebuffer_figures_has_no_percentage() -> None:
    shown = latest({k: v for k, v in RAW.items() if not k.startswith("fb_")}).model_dump(mode="json")

    assert (shown["fb_used_pct"], shown["fb_used_percent"]) == (None, None)
