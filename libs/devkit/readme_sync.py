"""Rewrite the topic catalogue between the README's markers: `python -m libs.devkit.readme_sync`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from libs.devkit.catalogue import render

__all__ = ["sync"]

_BLOCK = re.compile(r"(<!-- catalogue:start -->\n).*?(<!-- catalogue:end -->)", re.S)


def sync(readme: Path) -> bool:
    """Put the generated catalogue between the markers; returns True when the file changed."""
    text = readme.read_text()
    updated = _BLOCK.sub(lambda m: m.group(1) + render() + m.group(2), text)
    if updated != text:
        readme.write_text(updated)
    return updated != text


if __name__ == "__main__":
    changed = sync(Path(sys.argv[1] if len(sys.argv) > 1 else "README.md"))
    print("README.md catalogue updated" if changed else "README.md catalogue already current")
