"""The file:// store's root is owner-only, and the default one in the shared temp dir must be this user's
own real directory."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from libs.common.objectstore import ObjectStoreError, default_url, open_store


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default store's directory, under a temp dir of this test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / "gpucloud-objects"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_default_store_directory_is_created_owner_only(temp_root: Path) -> None:
    open_store("")
    assert _mode(temp_root) == 0o700


def test_a_default_store_directory_left_world_readable_is_made_owner_only(temp_root: Path) -> None:
    temp_root.mkdir(mode=0o755)
    os.chmod(temp_root, 0o755)  # noqa: S103 - the loose mode this test expects it to tighten
    open_store(default_url())
    assert _mode(temp_root) == 0o700


def test_a_default_store_root_that_is_a_link_is_refused(temp_root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    temp_root.symlink_to(elsewhere)
    with pytest.raises(ObjectStoreError, match="not a directory"):
        open_store("")


def test_a_default_store_root_of_another_user_is_refused(
    temp_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp_root.mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(temp_root).st_uid + 1)
    with pytest.raises(ObjectStoreError, match="not this user's"):
        open_store("")


def test_a_file_store_root_it_creates_is_owner_only(tmp_path: Path) -> None:
    root = tmp_path / "a" / "store"
    open_store(root.as_uri())
    assert _mode(root) == 0o700
