"""ObjectStore: put, get, ranges, list, delete over obstore's stores (local, S3, memory)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import obstore as obs
from obstore.store import LocalStore, MemoryStore, S3Store

__all__ = ["ObjectInfo", "ObjectNotFound", "ObjectStore", "ObjectStoreError", "default_url", "open_store"]

#: Environment read for an s3:// store besides the AWS_* variables obstore reads itself.
ENDPOINT_ENV = "GPUCLOUD_OBJECT_STORE_ENDPOINT"


class ObjectStoreError(RuntimeError):
    """The store refused or failed an operation (unreachable, denied, misconfigured)."""


class ObjectNotFound(ObjectStoreError, KeyError):
    """No object under that key."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key

    def __str__(self) -> str:
        return f"no object {self.key!r}"


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int
    last_modified: datetime


def _check_key(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"object key {key!r}: expected relative segments without '.', '..' or '//'")
    return key


class ObjectStore:
    """A bucket (or directory) of objects, addressed by '/'-separated keys."""

    def __init__(self, store: Any, *, url: str) -> None:
        self._store = store
        self.url = url

    def __repr__(self) -> str:
        return f"ObjectStore({self.url!r})"

    async def put(self, key: str, data: bytes) -> None:
        """Write the whole object (replacing any); a reader sees the old bytes or the new, never part."""
        try:
            await obs.put_async(self._store, _check_key(key), data)
        except ValueError:
            raise
        except Exception as e:
            raise ObjectStoreError(f"put {key!r} to {self.url}: {e}") from e

    async def put_file(self, key: str, path: Path) -> int:
        """Upload a file (multipart when large); returns the bytes sent."""
        size = await asyncio.to_thread(os.path.getsize, path)
        try:
            await obs.put_async(self._store, _check_key(key), path)
        except ValueError:
            raise
        except Exception as e:
            raise ObjectStoreError(f"put {key!r} to {self.url}: {e}") from e
        return size

    async def get(self, key: str) -> bytes:
        try:
            result = await obs.get_async(self._store, _check_key(key))
            return bytes(await result.bytes_async())
        except FileNotFoundError as e:
            raise ObjectNotFound(key) from e
        except ValueError:
            raise
        except Exception as e:
            raise ObjectStoreError(f"get {key!r} from {self.url}: {e}") from e

    async def get_range(self, key: str, *, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object; end past its size is cut to it."""
        if start < 0 or end < start:
            raise ValueError(f"range [{start}, {end}): expected 0 <= start <= end")
        if start == end:
            return b""
        try:
            info = await self.head(key)
            end = min(end, info.size)
            if start >= end:
                return b""
            return bytes(await obs.get_range_async(self._store, key, start=start, end=end))
        except ObjectStoreError:
            raise
        except FileNotFoundError as e:
            raise ObjectNotFound(key) from e
        except Exception as e:
            raise ObjectStoreError(f"get {key!r} from {self.url}: {e}") from e

    async def download(self, key: str, path: Path, *, chunk_bytes: int = 8 * 1024 * 1024) -> int:
        """Write an object to a file (through a temporary name, renamed at the end); returns its size."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        size = 0
        try:
            result = await obs.get_async(self._store, _check_key(key))
            with partial.open("wb") as f:
                async for chunk in result.stream(min_chunk_size=chunk_bytes):
                    f.write(bytes(chunk))
                    size += len(chunk)
        except FileNotFoundError as e:
            partial.unlink(missing_ok=True)
            raise ObjectNotFound(key) from e
        except ValueError:
            raise
        except Exception as e:
            partial.unlink(missing_ok=True)
            raise ObjectStoreError(f"get {key!r} from {self.url}: {e}") from e
        os.replace(partial, path)
        return size

    async def head(self, key: str) -> ObjectInfo:
        try:
            meta = await obs.head_async(self._store, _check_key(key))
        except FileNotFoundError as e:
            raise ObjectNotFound(key) from e
        except ValueError:
            raise
        except Exception as e:
            raise ObjectStoreError(f"head {key!r} on {self.url}: {e}") from e
        return _info(meta)

    async def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (a folder: end it with '/'), sorted by key."""
        found: list[ObjectInfo] = []
        try:
            async for batch in obs.list(self._store, prefix=prefix.rstrip("/") or None):
                found.extend(_info(m) for m in batch if m["path"].startswith(prefix))
        except FileNotFoundError:
            return []
        except Exception as e:
            raise ObjectStoreError(f"list {prefix!r} on {self.url}: {e}") from e
        return sorted(found, key=lambda i: i.key)

    async def delete(self, key: str) -> None:
        """Remove an object; removing a missing one is not an error."""
        try:
            await obs.delete_async(self._store, _check_key(key))
        except FileNotFoundError:
            return
        except ValueError:
            raise
        except Exception as e:
            raise ObjectStoreError(f"delete {key!r} on {self.url}: {e}") from e

    async def delete_prefix(self, prefix: str) -> int:
        """Remove every object under ``prefix``; returns how many."""
        keys = [i.key for i in await self.list(prefix)]
        for key in keys:
            await self.delete(key)
        return len(keys)


def _info(meta: Mapping[str, Any]) -> ObjectInfo:
    return ObjectInfo(key=str(meta["path"]), size=int(meta["size"]), last_modified=meta["last_modified"])


def default_url() -> str:
    """What an empty OBJECT_STORE_URL means: a directory every process of this host shares."""
    return (Path(tempfile.gettempdir()) / "gpucloud-objects").as_uri()


def _make_root(root: Path, *, shared: bool) -> None:
    """A file:// store's root, created owner-only (tenants' logs are in it). The default one, in the
    shared temp dir, must be a real directory of this user's: another's (or a link) could read them all."""
    if not root.exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another process of this host made it first
            root.mkdir(mode=0o700)
            os.chmod(root, 0o700)  # not loosened by a umask, nor left to one
    if not shared:
        return
    info = root.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ObjectStoreError(
            f"default object store {root}: not a directory (a link?); set OBJECT_STORE_URL"
        )
    if info.st_uid != os.getuid():
        raise ObjectStoreError(
            f"default object store {root}: owned by uid {info.st_uid}, not this user's; set OBJECT_STORE_URL"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(root, 0o700)  # made by an older version with the umask's mode


def open_store(url: str, *, environ: Mapping[str, str] | None = None) -> ObjectStore:
    """``file:///abs/dir`` (created), ``s3://bucket[/prefix]`` or ``memory://``.

    An s3 store takes its credentials and region from the usual AWS_* variables and its endpoint from
    GPUCLOUD_OBJECT_STORE_ENDPOINT (an S3-compatible server: MinIO, Ceph, moto); an http:// endpoint
    is allowed, for such servers on a private network.
    """
    env = os.environ if environ is None else environ
    parsed = urlparse(url or default_url())
    if parsed.scheme == "memory":
        return ObjectStore(MemoryStore(), url=url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise ValueError(f"object store {url!r}: expected file:///absolute/path")
        root = Path(parsed.path)
        _make_root(root, shared=not url or url == default_url())
        return ObjectStore(LocalStore(root), url=url)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValueError(f"object store {url!r}: expected s3://bucket[/prefix]")
        config: dict[str, Any] = {}
        endpoint = env.get(ENDPOINT_ENV, "")
        if endpoint:
            config["endpoint"] = endpoint
        for name, key in (
            ("AWS_ACCESS_KEY_ID", "access_key_id"),
            ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
            ("AWS_SESSION_TOKEN", "session_token"),
            ("AWS_REGION", "region"),
            ("AWS_DEFAULT_REGION", "region"),
        ):
            if env.get(name) and key not in config:
                config[key] = env[name]
        client = {"allow_http": True} if endpoint.startswith("http://") else {}
        prefix = parsed.path.strip("/") or None
        store = S3Store(parsed.netloc, prefix=prefix, config=config, client_options=client)  # type: ignore[arg-type]
        return ObjectStore(store, url=url)
    raise ValueError(f"object store {url!r}: expected a file://, s3:// or memory:// URL")
