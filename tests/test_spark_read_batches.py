"""The Spark reader's native batches equal the pyarrow-cast batches they replace.

No Spark session: the reader's partition functions run in-process on a small store, once
through ``rocketstore._native.spark_read_log``/``spark_conform`` and once through
``read_arrow`` + ``_conform`` (the pyarrow cast), for the full schema, a schema the lean
builder serves, and a schema with a non-default type (cast by pyarrow).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import types as T

import rocketstore
from rocketstore._stores import commitlog_files
from rocketstore.spark._reader import (
    MESSAGE_SCHEMA,
    FilePartition,
    QueuePartition,
    ReadSettings,
    _arrow_target,
    _conform,
    _native_target,
    read_file,
    read_queue,
)


def _field(name: str, dtype: T.DataType) -> T.StructField:
    return T.StructField(name, dtype, True)


LEAN = T.StructType(
    [
        _field("store", T.StringType()),
        _field("born_timestamp", T.TimestampType()),
        _field("topic", T.StringType()),
        _field("queue_offset", T.LongType()),
        _field("body", T.BinaryType()),
        _field("store_size", T.IntegerType()),
    ]
)
BODY = T.StructType([_field("body", T.BinaryType())])
MIXED = T.StructType([_field("tags", T.StringType()), _field("store_timestamp", T.TimestampType())])
RECAST = T.StructType([_field("queue_id", T.LongType()), _field("body", T.BinaryType())])


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spark-read") / "store"
    n = 3000
    table = pa.table(
        {
            "topic": [f"T{i % 3}" for i in range(n)],
            "body": [bytes([i % 251]) * (i % 300) for i in range(n)],
            "queue_id": [i % 4 for i in range(n)],
            "tags": [None if i % 5 == 0 else f"tag{i % 7}" for i in range(n)],
            "keys": [None if i % 3 == 0 else f"k{i} k{i + 1}" for i in range(n)],
        }
    )
    with rocketstore.MessageStore(path) as s:
        for start in range(0, n, 1000):
            s.put_batch(table.slice(start, 1000))
    return path


def _old_file(store: rocketstore.MessageStore, p: FilePartition, target: pa.Schema) -> pa.Table:
    batches = []
    offset = p.start
    while offset < p.end:
        batch, nxt = store.read_arrow(offset, max_messages=700, end_offset=p.end)
        if batch.num_rows:
            batches.append(_conform(batch, p.store, target))
        if nxt <= offset:
            break
        offset = nxt
    return pa.Table.from_batches(batches, schema=target)


@pytest.mark.parametrize("schema", [MESSAGE_SCHEMA, LEAN, BODY, MIXED, RECAST])
def test_file_batches_equal_the_cast_ones(store_path: Path, schema: T.StructType) -> None:
    settings = ReadSettings.parse({"path": str(store_path), "maxMessagesPerBatch": "700"})
    target = _arrow_target(schema)
    assert _native_target(target) == (schema is not RECAST)
    with settings.open(store_path) as store:
        (start, size) = commitlog_files(store_path)[0]
        p = FilePartition(str(store_path), start, start + size)
        got = list(read_file(settings, store, p, target))
        want = _old_file(store, p, target)
    assert all(b.schema.equals(target) for b in got)
    assert [b.num_rows for b in got][:-1] == [700] * (len(got) - 1)
    assert pa.Table.from_batches(got, schema=target).equals(want)
    assert want.num_rows == 3000


@pytest.mark.parametrize("schema", [MESSAGE_SCHEMA, LEAN, MIXED])
def test_queue_and_topic_batches_equal_the_cast_ones(
    store_path: Path, schema: T.StructType
) -> None:
    target = _arrow_target(schema)
    settings = ReadSettings.parse({"path": str(store_path), "topics": "T1"})
    with settings.open(store_path) as store:
        (start, size) = commitlog_files(store_path)[0]
        p = FilePartition(str(store_path), start, start + size)
        got = pa.Table.from_batches(list(read_file(settings, store, p, target)), schema=target)
        full, _ = store.read_arrow(0, max_messages=10_000)
        keep = full.filter(pa.array([t == "T1" for t in full.column("topic").to_pylist()]))
        assert got.equals(pa.Table.from_batches([_conform(keep, p.store, target)]))
        q = QueuePartition(str(store_path), "T1", 1, 0, 10_000)
        got = pa.Table.from_batches(list(read_queue(settings, store, q, target)), schema=target)
        batch, _ = store.get_message_arrow("T1", 1, 0, 10_000)
        assert got.num_rows == batch.num_rows > 0
        assert got.equals(pa.Table.from_batches([_conform(batch, q.store, target)]))
