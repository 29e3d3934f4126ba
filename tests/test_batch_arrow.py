"""put_batch with Arrow input (any PyCapsule producer) and RecordBatch results."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pytest

from rocketstore import MessageStore
from rocketstore._arrow import COLUMNS, RESULT_SCHEMA
from rocketstore.exceptions import (
    InvalidMessageError,
    MessageTooLargeError,
    StoreClosedError,
    StoreReadOnlyError,
)

#: Small consume queue and index files: the defaults (6 MB per queue, a 420 MB index file)
#: make every store in a test slow to create and to checksum.
SIDE_FILES: dict[str, Any] = {
    "mapped_file_size_consume_queue": 20 * 1024,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
}

SMALL: dict[str, Any] = {
    **SIDE_FILES,
    "mapped_file_size_commit_log": 64 * 1024,
    "max_message_size": 4096,
}


@pytest.fixture
def store(store_dir: Path) -> Iterator[MessageStore]:
    with MessageStore(store_dir, **SMALL) as s:
        yield s


def read_all(store: MessageStore) -> list[Any]:
    return list(store.scan())


def test_minimal_table_round_trip(store: MessageStore) -> None:
    table = pa.table({"topic": ["A", "B", "A"], "body": [b"a0", b"b0", b"a1"]})
    result = store.put_batch(table)
    assert isinstance(result, pa.RecordBatch)
    assert result.schema == RESULT_SCHEMA
    assert result.num_rows == 3
    assert result.column("status").to_pylist() == ["PUT_OK"] * 3
    assert result.column("queue_offset").to_pylist() == [0, 0, 1]
    offsets = result.column("commitlog_offset").to_pylist()
    msgs = read_all(store)
    assert [m.commitlog_offset for m in msgs] == offsets
    assert [(m.topic, m.body) for m in msgs] == [("A", b"a0"), ("B", b"b0"), ("A", b"a1")]
    assert result.column("msg_id").to_pylist() == [m.msg_id for m in msgs]
    assert result.column("wrote_bytes").to_pylist() == [m.store_size for m in msgs]
    assert result.column("store_timestamp").to_pylist() == [m.store_timestamp for m in msgs]


def test_put_columns_are_the_native_list_and_put_argument_names() -> None:
    import inspect

    assert COLUMNS[:2] == ("topic", "body")
    assert len(set(COLUMNS)) == len(COLUMNS)
    params = inspect.signature(MessageStore.put).parameters
    assert set(COLUMNS) <= set(params), set(COLUMNS) - set(params)


def test_every_column(store: MessageStore) -> None:
    props_type = pa.map_(pa.string(), pa.string())
    table = pa.table(
        {
            "topic": pa.array(["T", "T", "U"]),
            "body": pa.array([b"x", b"y", b"z"], pa.large_binary()),
            "queue_id": pa.array([1, 2, None], pa.int16()),
            "tags": pa.array(["TagA", None, "TagC"]),
            "keys": pa.array([["k1", "k2"], None, []], pa.list_(pa.string())),
            "properties": pa.array([[("a", "1"), ("b", "2")], None, []], props_type),
            "flag": pa.array([5, None, -1], pa.int32()),
            "born_timestamp": pa.array([1_700_000_000_000, None, 1], pa.int64()),
            "born_host": pa.array(["10.1.2.3:4000", None, "[::1]:5"]),
        }
    )
    result = store.put_batch(table)
    assert result.column("status").to_pylist() == ["PUT_OK"] * 3
    m0, m1, m2 = read_all(store)
    assert (m0.queue_id, m1.queue_id, m2.queue_id) == (1, 2, 0)
    assert (m0.tags, m1.tags, m2.tags) == ("TagA", None, "TagC")
    assert (m0.keys, m1.keys, m2.keys) == (["k1", "k2"], [], [])
    assert (m0.properties["a"], m0.properties["b"]) == ("1", "2")
    assert "a" not in m1.properties
    assert "a" not in m2.properties
    assert (m0.flag, m1.flag, m2.flag) == (5, 0, -1)
    assert m0.born_timestamp == 1_700_000_000_000
    assert m2.born_timestamp == 1
    assert abs(m1.born_timestamp - time.time() * 1000) < 60_000
    assert m0.born_host == "10.1.2.3:4000"
    assert m2.born_host == "[::1]:5"
    assert m0.store_host == "127.0.0.1:10911"
    assert result.column("msg_id").to_pylist() == [m0.msg_id, m1.msg_id, m2.msg_id]


def test_store_host_per_message(store: MessageStore) -> None:
    table = pa.table(
        {"topic": ["T", "T"], "body": [b"a", b"b"], "store_host": [None, "192.168.0.9:10911"]}
    )
    result = store.put_batch(table)
    r = store.put("T", b"c", store_host="10.0.0.7:1")
    r6 = store.put("T", b"d", store_host="[::1]:5")
    m0, m1, m2, m3 = read_all(store)
    assert m0.store_host == "127.0.0.1:10911"
    assert (m1.store_host, m2.store_host, m3.store_host) == (
        "192.168.0.9:10911",
        "10.0.0.7:1",
        "[::1]:5",
    )
    assert result.column("msg_id").to_pylist() == [m0.msg_id, m1.msg_id]
    assert (r.msg_id, r6.msg_id) == (m2.msg_id, m3.msg_id)
    assert len(r6.msg_id) == 56


def test_same_bytes_as_the_dict_path(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {
            "topic": f"T{i % 3}",
            "body": bytes([i % 256]) * (i % 50 + 1),
            "queue_id": i % 4,
            "tags": f"tag{i % 2}",
            "keys": [f"k{i}", f"x{i}"],
            "properties": {"n": str(i)},
            "flag": i,
            "born_timestamp": 1_600_000_000_000 + i,
        }
        for i in range(200)
    ]
    props = pa.array(
        [list(r["properties"].items()) for r in rows], pa.map_(pa.string(), pa.string())
    )
    table = pa.table(
        {**{k: [r[k] for r in rows] for k in rows[0] if k != "properties"}, "properties": props}
    )
    config = {**SMALL, "auto_uniq_key": False}
    with (
        MessageStore(tmp_path / "dicts", **config) as a,
        MessageStore(tmp_path / "arrow", **config) as b,
    ):
        from_dicts = a.put_batch(rows)
        from_arrow = b.put_batch(table)
        assert [r.commitlog_offset for r in from_dicts] == from_arrow.column(
            "commitlog_offset"
        ).to_pylist()
        assert [r.msg_id for r in from_dicts] == from_arrow.column("msg_id").to_pylist()
        ma, mb = read_all(a), read_all(b)
        assert [strip(m) for m in ma] == [strip(m) for m in mb]


def strip(m: Any) -> tuple[Any, ...]:
    """Everything that does not depend on the time of writing (the property CRC covers it)."""
    props = {k: v for k, v in m.properties.items() if k != "__CRC32#"}
    return (
        m.topic,
        m.body,
        m.queue_id,
        m.queue_offset,
        m.store_size,
        m.tags,
        m.keys,
        props,
        m.flag,
        m.born_timestamp,
    )


def test_column_type_variants(store: MessageStore) -> None:
    n = 6
    topics = pa.array(["A", "B", "A", "B", "A", "B"]).dictionary_encode()
    bodies = pa.chunked_array([pa.array([b"0", b"1"]), pa.array([b"2", b"3", b"4", b"5"])])
    queue_ids = pa.array([0, 1, 2, 3, 4, 5], pa.uint8())
    keys_joined = pa.array(["a b", "c", None, "", "  d  e ", "f"], pa.large_string())
    table = pa.table(
        {"topic": topics, "body": cast(Any, bodies), "queue_id": queue_ids, "keys": keys_joined}
    )
    result = store.put_batch(table)
    assert result.num_rows == n
    msgs = read_all(store)
    assert [m.body for m in msgs] == [str(i).encode() for i in range(n)]
    assert [m.topic for m in msgs] == ["A", "B"] * 3
    assert [m.keys for m in msgs] == [["a", "b"], ["c"], [], [], ["d", "e"], ["f"]]

    # A RecordBatch works like a Table; string bodies are written as their UTF-8 bytes.
    batch = pa.RecordBatch.from_pydict({"topic": ["S"], "body": pa.array(["héllo"], pa.string())})
    store.put_batch(batch)
    assert read_all(store)[-1].body == "héllo".encode()

    fixed = pa.table({"topic": ["F", "F"], "body": pa.array([b"abc", b"def"], pa.binary(3))})
    store.put_batch(fixed)
    assert [m.body for m in read_all(store)[-2:]] == [b"abc", b"def"]


def test_dictionary_columns(store: MessageStore) -> None:
    """Dictionary-typed text columns (read through their keys, values checked once) give the
    same messages and the same row errors as plain ones."""
    # int8, int16 and int32 keys, a binary (body) dictionary, a null key, a sliced table.
    topic = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 0, 1, 2, 0], pa.int8()), pa.array(["A", "B", "unused"])
    )
    tags = pa.DictionaryArray.from_arrays(
        pa.array([1, 0, None, 1, 0, 1], pa.int32()), pa.array(["ta", "tb"])
    )
    body = pa.array([b"0", b"1", b"0", b"1", b"0", b"1"]).dictionary_encode()
    keys = pa.DictionaryArray.from_arrays(
        pa.array([0, 0, 1, 1, 0, 1], pa.int16()), pa.array(["k1 k2", "k3"])
    )
    table = pa.table({"topic": topic, "body": body, "tags": tags, "keys": keys})
    store.put_batch(table.slice(1, 5))
    msgs = read_all(store)
    assert [m.topic for m in msgs] == ["B", "A", "B", "unused", "A"]
    assert [m.body for m in msgs] == [b"1", b"0", b"1", b"0", b"1"]
    assert [m.tags for m in msgs] == ["ta", None, "tb", "ta", "tb"]
    assert [m.keys for m in msgs] == [["k1", "k2"], ["k3"], ["k3"], ["k1", "k2"], ["k3"]]

    def refused(field: str, **cols: Any) -> None:
        t = pa.table({"topic": ["T", "T", "T"], "body": [b"a", b"b", b"c"], **cols})
        e = check_refused(store, t, InvalidMessageError)
        assert isinstance(e, InvalidMessageError)
        assert e.field == field, str(e)
        assert "message 1" in str(e), str(e)

    dict_of = pa.DictionaryArray.from_arrays
    refused("topic", topic=dict_of(pa.array([0, None, 0], pa.int32()), pa.array(["T"])))
    refused("topic", topic=dict_of(pa.array([0, 1, 0], pa.int32()), pa.array(["T", None])))
    refused("topic", topic=dict_of(pa.array([0, 1, 0], pa.int32()), pa.array(["T", "bad topic"])))
    refused("tags", tags=dict_of(pa.array([0, 1, 0], pa.int8()), pa.array(["ok", "a\x01b"])))


def test_sliced_tables_and_arrays_with_offsets(store: MessageStore) -> None:
    base = pa.table(
        {
            "topic": pa.array([f"T{i % 2}" for i in range(20)]),
            "body": pa.array([f"body{i}".encode() for i in range(20)]),
            "tags": pa.array([None if i % 3 == 0 else f"t{i}" for i in range(20)]),
            "keys": pa.array(
                [[f"k{i}"] if i % 4 else None for i in range(20)], pa.list_(pa.string())
            ),
            "properties": pa.array(
                [[("i", str(i))] if i % 5 else None for i in range(20)],
                pa.map_(pa.string(), pa.string()),
            ),
            "queue_id": pa.array([None if i % 7 == 0 else i % 3 for i in range(20)], pa.int64()),
        }
    )
    part = base.slice(5, 11)  # every column has a non-zero offset, with nulls
    result = store.put_batch(part)
    assert result.num_rows == 11
    msgs = read_all(store)
    for m, i in zip(msgs, range(5, 16), strict=True):
        assert m.body == f"body{i}".encode()
        assert m.topic == f"T{i % 2}"
        assert m.tags == (None if i % 3 == 0 else f"t{i}")
        assert m.keys == ([f"k{i}"] if i % 4 else [])
        assert m.properties.get("i") == (str(i) if i % 5 else None)
        assert m.queue_id == (0 if i % 7 == 0 else i % 3)

    # Chunked columns whose chunks are slices.
    chunks = [base.slice(0, 3), base.slice(10, 4), base.slice(17, 3)]
    combined = pa.concat_tables(chunks)
    assert combined.column("body").num_chunks == 3
    store.put_batch(combined)
    expected = [f"body{i}".encode() for i in [0, 1, 2, 10, 11, 12, 13, 17, 18, 19]]
    assert [m.body for m in read_all(store)[11:]] == expected


def test_born_timestamp_from_timestamps(store: MessageStore) -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    ms = int(when.timestamp() * 1000)
    table = pa.table(
        {
            "topic": ["T"] * 4,
            "body": [b"s", b"ms", b"us", b"ns"],
        }
    )
    for unit in ("s", "ms", "us", "ns"):
        col = pa.array([when] * 4, pa.timestamp(unit, tz="UTC"))
        store.put_batch(table.append_column("born_timestamp", col))
    stamps = [m.born_timestamp for m in read_all(store)]
    assert stamps[0:4] == [ms // 1000 * 1000] * 4
    assert stamps[4:] == [ms] * 12
    naive = pa.array([datetime(2024, 1, 1)], pa.timestamp("ms"))
    store.put_batch(pa.table({"topic": ["T"], "body": [b"x"], "born_timestamp": naive}))
    assert read_all(store)[-1].born_timestamp == 1_704_067_200_000


def test_empty_table(store: MessageStore) -> None:
    empty = pa.table({"topic": pa.array([], pa.string()), "body": pa.array([], pa.binary())})
    result = store.put_batch(empty)
    assert result.num_rows == 0
    assert result.schema == RESULT_SCHEMA
    assert read_all(store) == []


def test_result_can_be_joined_back(store: MessageStore) -> None:
    table = pa.table({"topic": ["T"] * 100, "body": [str(i).encode() for i in range(100)]})
    result = store.put_batch(table)
    joined = pa.Table.from_batches([result])
    assert joined.column("status").type == pa.dictionary(pa.int8(), pa.string())
    assert joined.column("queue_offset").to_pylist() == list(range(100))
    result.validate(full=True)


# --------------------------------------------------------------------------------------
# errors: nothing is written
# --------------------------------------------------------------------------------------


def check_refused(
    store: MessageStore, table: Any, exc: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException:
    end = store.max_commitlog_offset()
    with pytest.raises(exc) as info:
        store.put_batch(table)
    assert store.max_commitlog_offset() == end
    return info.value


def test_schema_errors(store: MessageStore) -> None:
    e = check_refused(
        store, pa.table({"topic": ["T"], "body": [b"x"], "tag": ["t"]}), InvalidMessageError
    )
    assert cast(InvalidMessageError, e).field == "tag"
    assert "'tag'" in str(e)
    e = check_refused(store, pa.table({"body": [b"x"]}), InvalidMessageError)
    assert cast(InvalidMessageError, e).field == "topic"
    e = check_refused(store, pa.table({"topic": ["T"]}), InvalidMessageError)
    assert cast(InvalidMessageError, e).field == "body"
    check_refused(store, pa.table({"topic": [1], "body": [b"x"]}), TypeError)
    check_refused(store, pa.table({"topic": ["T"], "body": [1]}), TypeError)
    check_refused(store, pa.table({"topic": ["T"], "body": [b"x"], "queue_id": [1.5]}), TypeError)
    check_refused(store, pa.table({"topic": ["T"], "body": [b"x"], "queue_id": ["1"]}), TypeError)
    check_refused(store, pa.table({"topic": ["T"], "body": [b"x"], "keys": [1]}), TypeError)
    check_refused(
        store, pa.table({"topic": ["T"], "body": [b"x"], "properties": [{"a": "b"}]}), TypeError
    )
    check_refused(
        store, pa.table({"topic": ["T"], "body": [b"x"], "born_timestamp": ["x"]}), TypeError
    )
    dup = pa.Table.from_arrays(
        [pa.array(["T"]), pa.array([b"x"]), pa.array(["U"])], names=["topic", "body", "topic"]
    )
    check_refused(store, dup, InvalidMessageError)


def test_row_errors_name_the_index(store: MessageStore) -> None:
    def table(**override: Any) -> pa.Table:
        cols: dict[str, Any] = {"topic": ["T", "T", "T"], "body": [b"a", b"b", b"c"], **override}
        return pa.table(cols)

    cases: list[tuple[pa.Table, type[BaseException], str]] = [
        (table(topic=["T", "bad topic", "T"]), InvalidMessageError, "topic"),
        (table(topic=["T", None, "T"]), InvalidMessageError, "topic"),
        (table(body=[b"a", b"b", None]), InvalidMessageError, "body"),
        (table(body=[b"a", b"b", b"x" * 5000]), MessageTooLargeError, "body"),
        (table(queue_id=[0, -1, 0]), InvalidMessageError, "queue_id"),
        (table(queue_id=pa.array([0, 2**40, 0], pa.int64())), InvalidMessageError, "queue_id"),
        (table(tags=["ok", "a\x01b", None]), InvalidMessageError, "tags"),
        (
            table(keys=pa.array([["a"], ["b c"], []], pa.list_(pa.string()))),
            InvalidMessageError,
            "keys",
        ),
        (
            table(keys=pa.array([["a"], [None], []], pa.list_(pa.string()))),
            InvalidMessageError,
            "keys",
        ),
        (
            table(
                properties=pa.array([[], [("TAGS", "x")], []], pa.map_(pa.string(), pa.string()))
            ),
            InvalidMessageError,
            "properties",
        ),
        (
            table(properties=pa.array([[], [("a", None)], []], pa.map_(pa.string(), pa.string()))),
            InvalidMessageError,
            "properties",
        ),
        (table(born_host=["1.2.3.4:5", "nohost", None]), InvalidMessageError, "born_host"),
        (table(flag=pa.array([0, 2**33, 0], pa.int64())), InvalidMessageError, "flag"),
    ]
    for t, exc, field in cases:
        e = check_refused(store, t, exc)
        assert isinstance(e, InvalidMessageError)
        assert e.field == field, (field, str(e))
        if exc is not MessageTooLargeError:
            assert "message 1" in str(e) or "message 2" in str(e), str(e)


def test_uint64_overflow_is_refused(store: MessageStore) -> None:
    t = pa.table({"topic": ["T"], "body": [b"x"], "queue_id": pa.array([2**64 - 1], pa.uint64())})
    e = check_refused(store, t, InvalidMessageError)
    assert cast(InvalidMessageError, e).field == "queue_id"


def test_closed_and_read_only_stores(store_dir: Path) -> None:
    table = pa.table({"topic": ["T"], "body": [b"x"]})
    with MessageStore(store_dir, **SMALL) as store:
        store.put_batch(table)
    with pytest.raises(StoreClosedError):
        store.put_batch(table)
    with pytest.raises(StoreClosedError):
        store.put_batch(table.slice(0, 0))
    with MessageStore(store_dir, read_only=True, **SIDE_FILES) as ro:
        with pytest.raises(StoreReadOnlyError):
            ro.put_batch(table)
        with pytest.raises(StoreReadOnlyError):
            ro.put_batch(table.slice(0, 0))


class StreamOnly:
    """An Arrow producer that is not a pyarrow class and has only ``__arrow_c_stream__``."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self._table.__arrow_c_stream__(requested_schema)


class ArrayOnly:
    """An Arrow producer with only ``__arrow_c_array__`` (one struct array: a batch)."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self._batch = batch

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        schema, array = self._batch.__arrow_c_array__(requested_schema)
        return schema, array


def test_put_batch_from_any_arrow_stream_producer(store: MessageStore) -> None:
    """Arrow's PyCapsule interface: no pyarrow class needed, a stream of several batches is
    written as one all-or-nothing batch."""
    first = pa.table({"topic": ["A", "B"], "body": [b"0", b"1"], "keys": ["k0", "k1 k2"]})
    second = pa.table({"topic": ["C"], "body": [b"2"], "keys": pa.array([None], pa.string())})
    table = pa.concat_tables([first, second])
    assert table.column("body").num_chunks == 2
    producer = StreamOnly(table)
    assert not hasattr(producer, "__arrow_c_array__")
    result = store.put_batch(producer)
    assert isinstance(result, pa.RecordBatch)
    assert result.schema == RESULT_SCHEMA
    assert result.column("queue_offset").to_pylist() == [0, 0, 0]
    msgs = read_all(store)
    assert [(m.topic, m.body, m.keys) for m in msgs] == [
        ("A", b"0", ["k0"]),
        ("B", b"1", ["k1", "k2"]),
        ("C", b"2", []),
    ]
    batch = pa.RecordBatch.from_pydict({"topic": ["D"], "body": [b"3"]})
    assert store.put_batch(ArrayOnly(batch)).column("status").to_pylist() == ["PUT_OK"]
    reader = pa.RecordBatchReader.from_batches(batch.schema, [batch, batch])
    assert store.put_batch(reader).num_rows == 2
    assert len(read_all(store)) == 6


def test_bad_row_in_a_later_stream_batch_is_named_and_nothing_is_written(
    store: MessageStore,
) -> None:
    good = pa.table({"topic": ["T", "T"], "body": [b"a", b"b"]})
    bad = pa.table({"topic": ["T", "bad topic"], "body": [b"c", b"d"]})
    e = check_refused(store, StreamOnly(pa.concat_tables([good, bad])), InvalidMessageError)
    assert cast(InvalidMessageError, e).field == "topic"
    assert "message 3" in str(e), str(e)


def test_malformed_arrow_data_never_crashes(store: MessageStore) -> None:
    """Buffers from a producer are checked before a row is read: nothing is trusted."""
    # pyarrow checks only the first and last offsets when it builds these: a decreasing
    # offset inside, or invalid UTF-8 in a string column, reaches the producer interface.
    decreasing = pa.py_buffer(struct.pack("<3i", 0, 2, 1))
    two_bodies = pa.array([b"x", b"y"])
    for bad in (pa.Array.from_buffers(pa.string(), 2, [None, decreasing, pa.py_buffer(b"ab")]),):
        t = pa.Table.from_arrays([bad, two_bodies], names=["topic", "body"])
        check_refused(store, t, ValueError)
    t = pa.Table.from_arrays(
        [
            pa.array(["T", "T"]),
            pa.Array.from_buffers(pa.binary(), 2, [None, decreasing, pa.py_buffer(b"ab")]),
        ],
        names=["topic", "body"],
    )
    check_refused(store, t, ValueError)
    one = pa.py_buffer(struct.pack("<2i", 0, 1))
    not_utf8 = pa.Array.from_buffers(pa.string(), 1, [None, one, pa.py_buffer(b"\xff")])
    t = pa.Table.from_arrays([not_utf8, pa.array([b"x"])], names=["topic", "body"])
    e = check_refused(store, t, InvalidMessageError)
    assert cast(InvalidMessageError, e).field == "topic"
    assert "message 0" in str(e), str(e)
    # Text columns are checked as one span, then row by row at char boundaries: a character
    # split between two rows is valid UTF-8 as a span, but neither row is.
    two = pa.py_buffer(struct.pack("<3i", 0, 1, 2))
    split = pa.Array.from_buffers(pa.string(), 2, [None, two, pa.py_buffer("é".encode())])
    for name in ("topic", "tags", "keys"):
        cols: dict[str, Any] = {"topic": ["T", "T"], "body": [b"x", b"y"], name: split}
        e = check_refused(store, pa.table(cols), InvalidMessageError)
        assert cast(InvalidMessageError, e).field == name
        assert "message 0" in str(e), str(e)

    class Broken:
        def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
            raise RuntimeError("producer failed")

    check_refused(store, Broken(), RuntimeError)

    class NotACapsule:
        def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
            return "nope"

    check_refused(store, NotACapsule(), (TypeError, ValueError))
    store.put_batch(pa.table({"topic": ["T"], "body": [b"x"]}))
    assert [m.body for m in read_all(store)] == [b"x"]


def test_large_batch_smoke(store_dir: Path) -> None:
    n = 200_000
    table = pa.table(
        {
            "topic": pa.array([f"T{i % 4}" for i in range(n)]).dictionary_encode(),
            "body": pa.array([b"x" * 100] * n),
            "queue_id": pa.array([i % 8 for i in range(n)], pa.int32()),
        }
    )
    with MessageStore(store_dir, **SIDE_FILES, mapped_file_size_commit_log=16 << 20) as store:
        result = store.put_batch(table)
        assert result.num_rows == n
        assert result.column("status").unique().to_pylist() == ["PUT_OK"]
        offsets = cast(list[int], result.column("commitlog_offset").to_pylist())
        assert offsets == sorted(offsets)
        assert len(set(offsets)) == n
        count = 0
        it = store.scan()
        while batch := it.next_batch(50_000):
            count += len(batch)
        assert count == n
