"""The built console at /: assets cached for long, index.html never, unknown paths fall back to it."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse

from libs.common.http.errors import NotFound, error_response
from services.gateway.api.access import context_of

__all__ = ["SECURITY_HEADERS", "router"]

router = APIRouter(include_in_schema=False)

#: uPlot and Mantine set inline styles; nothing else is inline, and nothing comes from another origin.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
_IMMUTABLE = "public, max-age=31536000, immutable"  # Vite names assets by content hash


@router.get("/{path:path}")
async def console(path: str, request: Request) -> Response:
    if path == "api" or path.startswith("api/"):
        raise NotFound(f"path: no route /{path}", field="path")
    root = context_of(request).web.console_dir.resolve()
    index = root / "index.html"
    if not index.is_file():
        return _not_built(root)
    found = _file_under(root, path)
    if found is None or found == index:
        return FileResponse(index, headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"})
    cache = _IMMUTABLE if found.is_relative_to(root / "assets") else "no-cache"
    return FileResponse(found, headers={**SECURITY_HEADERS, "Cache-Control": cache})


def _file_under(root: Path, path: str) -> Path | None:
    """The file ``path`` names inside ``root``, or None (absent, a folder, or outside root)."""
    if not path:
        return None
    candidate = (root / path).resolve()
    if not candidate.is_relative_to(root) or not candidate.is_file():
        return None
    return candidate


def _not_built(root: Path) -> Response:
    response = error_response(
        503,
        "console_not_built",
        f"the console is not built: {root}/index.html is missing; `make install` builds it",
        details={"console_dir": str(root)},
    )
    response.headers.update(SECURITY_HEADERS)
    return response
