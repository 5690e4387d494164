"""Write each service's OpenAPI document to a folder, for the console's generated API types.

    python scripts/console_openapi.py console/openapi

Builds each app without starting it (nothing connects), so it needs no running stack.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from libs.common.db.migrate import SERVICES


def main(out: Path) -> None:
    os.environ.setdefault("ENVIRONMENT", "development")
    out.mkdir(parents=True, exist_ok=True)
    for service in SERVICES:
        app = importlib.import_module(f"services.{service}.app").create_app()
        (out / f"{service}.json").write_text(json.dumps(app.openapi(), indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "console/openapi"))
