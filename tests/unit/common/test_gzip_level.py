"""Every producer's batches are gzip at level 1 (libs/common/bus/gzip_level.py), readable as any gzip."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from libs.common.bus import create_producer
from libs.common.bus.gzip_level import gzip_level_encoder, use_gzip_level


def test_producers_gzip_at_level_1_batches_every_reader_decodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aiokafka.codec import gzip_encode as aiokafka_gzip_encode
    from aiokafka.record import default_records
    from aiokafka.record._crecords import default_records as c_records

    # Start from aiokafka's own level-9 encoder whatever ran before in this process (any producer made
    # in another test sets level 1 for the whole process); restored after the test.
    for module in (default_records, c_records):
        monkeypatch.setattr(module, "gzip_encode", aiokafka_gzip_encode)

    def build() -> bytes:
        builder = default_records.DefaultRecordBatchBuilder(
            magic=2,
            compression_type=default_records.DefaultRecordBatch.CODEC_GZIP,
            is_transactional=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 20,
        )
        for i in range(100):
            value = json.dumps({"gpu": f"GPU-{i}", "sm_util_pct": i / 3}).encode() * 10
            builder.append(i, timestamp=None, key=b"node-%d" % i, value=value, headers=[])
        return bytes(builder.build())

    level_9 = build()

    async def made() -> None:  # never started: only its set-up runs
        create_producer(bootstrap="127.0.0.1:9", client_id="gzip-test")

    asyncio.run(made())
    assert default_records.gzip_encode is not aiokafka_gzip_encode
    assert c_records.gzip_encode is not aiokafka_gzip_encode
    assert use_gzip_level() == 2  # the C builder and the pure-Python one
    level_1 = build()
    assert level_1 != level_9
    for raw in (level_9, level_1):
        batch = default_records.DefaultRecordBatch(bytearray(raw))
        assert batch.compression_type == default_records.DefaultRecordBatch.CODEC_GZIP
        records = list(batch)
        assert [r.key for r in records] == [b"node-%d" % i for i in range(100)]
        assert json.loads(records[7].value[: len(records[7].value) // 10]) == {
            "gpu": "GPU-7",
            "sm_util_pct": 7 / 3,
        }
    assert gzip.decompress(gzip_level_encoder(1)(b"x" * 1000)) == b"x" * 1000
