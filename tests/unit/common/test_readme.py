"""The README's topic catalogue is the registry's, and its commands are the Makefile's."""

from __future__ import annotations

import re
from pathlib import Path

from libs.devkit.catalogue import render

ROOT = Path(__file__).resolve().parents[3]


def test_readme_topic_catalogue_matches_the_event_registry() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- catalogue:start -->\n(.*?)<!-- catalogue:end -->", readme, re.S)
    assert block is not None
    assert block.group(1) == render(), "run: python -m libs.devkit.readme_sync"


def test_every_make_target_the_readme_names_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.M))
    named = set(re.findall(r"`make ([a-z-]+)`", readme)) | set(re.findall(r"^make ([a-z-]+)", readme, re.M))
    assert named
    assert named <= targets
