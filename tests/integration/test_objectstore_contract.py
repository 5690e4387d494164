"""The object store's contract, held on every backend: a local directory, memory, and S3 (moto's server).

The memory store is what unit tests use in place of the others; this test is what keeps it their twin.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from libs.common.objectstore import ObjectNotFound, ObjectStore, keys, open_store


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(params=["file", "memory", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    if request.param == "file":
        yield open_store(f"file://{tmp_path}/objects")
    elif request.param == "memory":
        yield open_store("memory://")
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = f"contract-{tmp_path.name.lower().replace('_', '-')[-40:]}"
        async with httpx.AsyncClient() as client:
            assert (await client.put(f"{endpoint}/{bucket}")).status_code == 200
        env = {
            "GPUCLOUD_OBJECT_STORE_ENDPOINT": endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
        }
        yield open_store(f"s3://{bucket}", environ=env)


async def test_put_get_head_and_replace(store: ObjectStore) -> None:
    await store.put("a/b/c.txt", b"first")
    await store.put("a/b/c.txt", b"second!")
    assert await store.get("a/b/c.txt") == b"second!"
    assert (await store.head("a/b/c.txt")).size == 7


async def test_missing_object_is_not_found(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFound) as e:
        await store.get("no/such")
    assert e.value.key == "no/such"
    with pytest.raises(ObjectNotFound):
        await store.head("no/such")
    with pytest.raises(ObjectNotFound):
        await store.get_range("no/such", start=0, end=3)
    await store.delete("no/such")  # deleting what is gone is fine


async def test_ranges_are_cut_to_the_size(store: ObjectStore) -> None:
    await store.put("r.bin", b"0123456789")
    assert await store.get_range("r.bin", start=2, end=5) == b"234"
    assert await store.get_range("r.bin", start=8, end=100) == b"89"
    assert await store.get_range("r.bin", start=10, end=12) == b""


async def test_list_is_by_prefix_and_sorted(store: ObjectStore) -> None:
    for key in ("logs/w1/p1/0000000002-5.log", "logs/w1/p1/0000000001-4.log", "logs/w10/p1/0000000001-1.log"):
        await store.put(key, b"x")
    listed = [i.key for i in await store.list(keys.log_prefix("w1"))]
    assert listed == ["logs/w1/p1/0000000001-4.log", "logs/w1/p1/0000000002-5.log"]
    assert await store.list("nothing/") == []
    assert await store.delete_prefix(keys.log_prefix("w1")) == 2
    assert [i.key for i in await store.list("logs/")] == ["logs/w10/p1/0000000001-1.log"]


async def test_files_up_and_down(store: ObjectStore, tmp_path: Path) -> None:
    src = tmp_path / "ckpt.bin"
    src.write_bytes(bytes(range(256)) * 4096)
    assert await store.put_file("checkpoints/w/p/files/ckpt.bin", src) == 1024 * 1024
    dst = tmp_path / "restored" / "ckpt.bin"
    assert await store.download("checkpoints/w/p/files/ckpt.bin", dst) == 1024 * 1024
    assert dst.read_bytes() == src.read_bytes()
    with pytest.raises(ObjectNotFound):
        await store.download("checkpoints/w/p/files/none", tmp_path / "none")
    assert not (tmp_path / "none").exists()
    assert not (tmp_path / "none.partial").exists()


async def test_bad_keys_are_refused(store: ObjectStore) -> None:
    for key in ("", "/abs", "a/../b", "a//b", "./a"):
        with pytest.raises(ValueError, match="object key"):
            await store.put(key, b"x")


def test_layout_keys_round_trip() -> None:
    key = keys.log_chunk("wl-1", "pl-2", seq=7, unix_ms=1234)
    assert key == "logs/wl-1/pl-2/0000000007-1234.log"
    parsed = keys.parse_log_chunk(key)
    assert parsed is not None
    assert (parsed.workload_id, parsed.placement_id, parsed.seq, parsed.unix_ms) == (
        "wl-1",
        "pl-2",
        7,
        1234,
    )
    assert keys.parse_log_chunk("outputs/wl-1/pl-2/manifest.json") is None
    assert (
        keys.output_file("wl-1", "pl-2", "model/weights.bin") == "outputs/wl-1/pl-2/files/model/weights.bin"
    )
    with pytest.raises(ValueError, match="relative path"):
        keys.output_file("wl-1", "pl-2", "../etc/passwd")
    with pytest.raises(ValueError, match="cannot name an object"):
        keys.log_prefix("../x")


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="file://, s3:// or memory://"):
        open_store("ftp://x")
    with pytest.raises(ValueError, match="absolute"):
        open_store("file://relative/dir")
