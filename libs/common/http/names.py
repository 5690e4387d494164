"""Names that callers choose and that travel on into URLs, file names, headers and other tenants' views."""

from __future__ import annotations

import re

__all__ = ["PROJECT_NAME_PATTERN", "PROJECT_NAME_RULE", "valid_project_name"]

#: A project name: what a workload's ``project`` tag, a budget and an export are keyed by. A safe set, so
#: that a name is always a valid file name and header value and reads the same to everyone.
PROJECT_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,63}$"
PROJECT_NAME_RULE = "1-63 characters, each an ASCII letter, a digit, '-', '_' or '.'"
_PROJECT_NAME = re.compile(PROJECT_NAME_PATTERN)


def valid_project_name(name: str) -> bool:
    """Whether ``name`` is in the safe set of project names (``PROJECT_NAME_RULE``)."""
    return _PROJECT_NAME.fullmatch(name) is not None
