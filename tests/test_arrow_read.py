"""The Arrow reads: read_arrow, get_message_arrow, read_consume_queue, read_index.

Every batch is compared with what ``put`` returned and with the per-message API (``scan``,
``get_message``), on a store whose small commit log files force records across file ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import rocketstore
from rocketstore import MESSAGE_SCHEMA, Message, MessageStore, PutResult
from rocketstore._arrow import CONSUME_QUEUE_SCHEMA, INDEX_SCHEMA
from rocketstore.exceptions import (
    CorruptionError,
    InvalidMessageError,
    OffsetOutOfRangeError,
    StoreClosedError,
)

SMALL: dict[str, Any] = {
    "mapped_file_size_commit_log": 16 * 1024,
    "mapped_file_size_consume_queue": 300 * 20,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
    "max_message_size": 4096,
}

Digest = Callable[[Path], dict[str, Any]]


@pytest.fixture
def store(store_dir: Path) -> Iterator[MessageStore]:
    with MessageStore(store_dir, **SMALL) as s:
        yield s


def fill(store: MessageStore, n: int = 120) -> list[PutResult]:
    """Messages over 3 topics and 2 queues, with and without tags, keys and properties."""
    out = []
    for i in range(n):
        out.append(
            store.put(
                f"Topic{i % 3}",
                (f"body-{i}-".encode() * (1 + i % 7))[: 40 + i],
                queue_id=i % 2,
                tags=None if i % 5 == 0 else f"Tag{'AB'[i % 2]}",
                keys=[] if i % 4 == 0 else [f"key-{i}", f"k{i % 10}"],
                properties={"n": str(i)} if i % 3 else None,
                flag=i,
                born_timestamp=1_700_000_000_000 + i,
                born_host=f"10.0.0.{i % 4}:{1000 + i}",
            )
        )
    assert all(r.ok for r in out)
    settle(store)
    return out


def settle(store: MessageStore) -> None:
    """Waits until every message put so far is dispatched to consume queues and the index."""
    deadline = time.monotonic() + 30
    while store.stats()["dispatch_behind_bytes"] > 0:
        assert time.monotonic() < deadline, "dispatch did not catch up"
        time.sleep(0.002)


def read_everything(store: MessageStore, step: int, **kwargs: Any) -> tuple[pa.Table, int]:
    batches = []
    offset = 0
    while True:
        batch, nxt = store.read_arrow(offset, max_messages=step, **kwargs)
        assert batch.schema == MESSAGE_SCHEMA
        if batch.num_rows == 0:
            assert nxt == offset
            break
        assert batch.num_rows <= step
        assert nxt > offset
        batches.append(batch)
        offset = nxt
    return pa.Table.from_batches(batches, schema=MESSAGE_SCHEMA), offset


def ms(ts: Any) -> list[int]:
    return [int(v) for v in ts.cast(pa.int64()).to_pylist()]


def assert_rows_match(table: pa.Table | pa.RecordBatch, messages: list[Message]) -> None:
    """Every column of every row equals the Message attribute of the same name."""
    assert table.num_rows == len(messages)
    cols = table.to_pydict()
    born = ms(table.column("born_timestamp"))
    stored = ms(table.column("store_timestamp"))
    for i, m in enumerate(messages):
        assert cols["topic"][i] == m.topic
        assert cols["queue_id"][i] == m.queue_id
        assert cols["queue_offset"][i] == m.queue_offset
        assert cols["commitlog_offset"][i] == m.commitlog_offset
        assert cols["store_size"][i] == m.store_size
        assert cols["body"][i] == m.body
        assert cols["body_crc"][i] == m.body_crc
        assert cols["flag"][i] == m.flag
        assert cols["sys_flag"][i] == m.sys_flag
        assert cols["tags"][i] == m.tags
        assert cols["keys"][i] == (" ".join(m.keys) if m.keys else None)
        assert dict(cols["properties"][i]) == m.properties
        assert [k for k, _ in cols["properties"][i]] == list(m.properties)
        assert born[i] == m.born_timestamp
        assert cols["born_host"][i] == m.born_host
        assert stored[i] == m.store_timestamp
        assert cols["store_host"][i] == m.store_host
        assert cols["reconsume_times"][i] == m.reconsume_times
        assert cols["prepared_transaction_offset"][i] == m.prepared_transaction_offset
        assert cols["msg_id"][i] == m.msg_id
        assert cols["uniq_key"][i] == m.uniq_key


def test_message_schema_is_exported() -> None:
    assert rocketstore.MESSAGE_SCHEMA is MESSAGE_SCHEMA
    assert MESSAGE_SCHEMA.names[:4] == ["topic", "queue_id", "queue_offset", "commitlog_offset"]
    assert MESSAGE_SCHEMA.field("store_timestamp").type == pa.timestamp("ms", tz="UTC")
    assert MESSAGE_SCHEMA.field("properties").type == pa.map_(pa.string(), pa.string())
    nullable = {f.name for f in MESSAGE_SCHEMA if f.nullable}
    assert nullable == {"tags", "keys", "uniq_key"}


@pytest.mark.parametrize("step", [1, 7, 65536])
def test_read_arrow_round_trip(store: MessageStore, step: int) -> None:
    results = fill(store, 200)
    assert len(store.commitlog_files()) > 2, "the data must span several commit log files"
    table, end = read_everything(store, step)
    assert end >= store.max_commitlog_offset()
    assert table.column("commitlog_offset").to_pylist() == [r.commitlog_offset for r in results]
    assert table.column("msg_id").to_pylist() == [r.msg_id for r in results]
    assert table.column("queue_offset").to_pylist() == [r.queue_offset for r in results]
    assert ms(table.column("store_timestamp")) == [r.store_timestamp for r in results]
    assert_rows_match(table, list(store.scan()))


def test_read_arrow_end_offset_bounds(store: MessageStore) -> None:
    results = fill(store, 30)
    offs = [r.commitlog_offset for r in results]
    batch, nxt = store.read_arrow(0, end_offset=offs[5])
    assert batch.column("commitlog_offset").to_pylist() == offs[:5]
    assert nxt == offs[5]
    # end_offset inside a record still includes the record that starts before it.
    batch, nxt = store.read_arrow(offs[5], end_offset=offs[5] + 1)
    assert batch.column("commitlog_offset").to_pylist() == [offs[5]]
    assert nxt == offs[6]
    # An empty range, and a range starting at end_offset.
    batch, nxt = store.read_arrow(offs[3], end_offset=offs[3])
    assert (batch.num_rows, nxt) == (0, offs[3])
    batch, nxt = store.read_arrow(offs[10], end_offset=offs[2])
    assert (batch.num_rows, nxt) == (0, offs[10])
    # max_messages and end_offset together: the smaller bound wins.
    batch, nxt = store.read_arrow(offs[1], max_messages=3, end_offset=offs[20])
    assert batch.column("commitlog_offset").to_pylist() == offs[1:4]
    assert nxt == offs[4]
    batch, nxt = store.read_arrow(offs[1], max_messages=0)
    assert (batch.num_rows, nxt) == (0, offs[1])
    # At and past the end of the data: empty, next_offset unchanged.
    end = store.max_commitlog_offset()
    for start in (end, end + 12345):
        batch, nxt = store.read_arrow(start)
        assert (batch.num_rows, nxt) == (0, start)


def test_read_arrow_bad_offsets(store: MessageStore) -> None:
    results = fill(store, 5)
    with pytest.raises(InvalidMessageError) as info:
        store.read_arrow(results[1].commitlog_offset + 1)
    assert info.value.field == "from_offset"
    with pytest.raises(OffsetOutOfRangeError):
        store.read_arrow(-1)
    with pytest.raises(InvalidMessageError):
        store.read_arrow(0, max_messages=-1)


def test_empty_store(store: MessageStore) -> None:
    batch, nxt = store.read_arrow()
    assert (batch.num_rows, nxt) == (0, 0)
    assert batch.schema == MESSAGE_SCHEMA
    batch, nxt = store.get_message_arrow("Nope", 0, 0)
    assert (batch.num_rows, nxt) == (0, 0)
    assert batch.schema == MESSAGE_SCHEMA
    cq = store.read_consume_queue("Nope", 0)
    assert cq.num_rows == 0
    assert cq.schema == CONSUME_QUEUE_SCHEMA
    index = store.read_index()
    assert index.num_rows == 0
    assert index.schema == INDEX_SCHEMA


def test_read_only_store(store_dir: Path, tree_digest: Digest) -> None:
    with MessageStore(store_dir, **SMALL) as s:
        fill(s, 60)
        expected = list(s.scan())
    (store_dir / "lock").unlink(missing_ok=True)
    before = tree_digest(store_dir)
    with MessageStore(store_dir, read_only=True, **SMALL) as ro:
        table, _ = read_everything(ro, 16, verify_crc=True)
        assert_rows_match(table, expected)
        batch, _ = ro.get_message_arrow("Topic1", 1, 0)
        assert_rows_match(batch, [m for m in expected if (m.topic, m.queue_id) == ("Topic1", 1)])
        assert ro.read_consume_queue("Topic1", 1).num_rows == batch.num_rows
        assert ro.read_index().num_rows > 0
    assert tree_digest(store_dir) == before


def flip_body_byte(store: MessageStore, body: bytes) -> None:
    """Flips one byte of ``body`` where it is stored in the commit log files (the mapping
    shares the page cache, so an open store sees the change)."""
    for name in store.commitlog_files():
        data = Path(name).read_bytes()
        pos = data.find(body)
        if pos >= 0:
            with open(name, "r+b") as f:
                f.seek(pos + len(body) // 2)
                f.write(bytes([data[pos + len(body) // 2] ^ 0xFF]))
            return
    raise AssertionError("body not found")


def test_verify_crc_catches_a_flipped_body_byte(store: MessageStore) -> None:
    results = fill(store, 40)
    victim = store.look_message_by_offset(results[17].commitlog_offset)
    store.flush()
    flip_body_byte(store, victim.body)
    # Without verification the damaged body is returned as stored.
    table, _ = read_everything(store, 1000)
    assert table.num_rows == 40
    assert table.column("body")[17].as_py() != victim.body
    # With verification: a CorruptionError naming the file and the record's offset ...
    with pytest.raises(CorruptionError) as info:
        read_everything(store, 1000, verify_crc=True)
    e = info.value
    assert e.offset == victim.commitlog_offset
    assert e.file is not None
    assert Path(e.file).name == f"{(victim.commitlog_offset // (16 * 1024)) * 16 * 1024:020d}"
    assert e.kind == "CRC mismatch"
    # ... also when the damaged record is the first one asked for,
    with pytest.raises(CorruptionError):
        store.read_arrow(victim.commitlog_offset, verify_crc=True)
    # ... and through the consume queue.
    with pytest.raises(CorruptionError) as info:
        store.get_message_arrow(victim.topic, victim.queue_id, 0, verify_crc=True)
    assert info.value.offset == victim.commitlog_offset
    # Records before the damaged one are still readable with verification.
    batch, nxt = store.read_arrow(0, end_offset=victim.commitlog_offset, verify_crc=True)
    assert batch.num_rows == 17
    assert nxt == victim.commitlog_offset


def test_get_message_arrow_matches_get_message(store: MessageStore) -> None:
    fill(store, 120)
    for topic, queue_id, lo, hi in store.consume_queues():
        assert lo == 0
        expected = []
        offset = lo
        while offset < hi:
            r = store.get_message(topic, queue_id, offset, 32)
            expected += r.messages
            offset = r.next_begin_offset
        got = []
        offset = 0
        while True:
            batch, nxt = store.get_message_arrow(topic, queue_id, offset, 3)
            if batch.num_rows == 0:
                assert nxt == offset == hi
                break
            got.append(batch)
            offset = nxt
        assert_rows_match(pa.Table.from_batches(got), expected)
        assert [m.queue_offset for m in expected] == list(range(hi))


def test_get_message_arrow_bounds_and_tags(store: MessageStore) -> None:
    results = fill(store, 120)
    mine = [(i, r) for i, r in enumerate(results) if (f"Topic{i % 3}", i % 2) == ("Topic1", 1)]
    hi = store.max_offset_in_queue("Topic1", 1)
    assert hi == len(mine)
    batch, nxt = store.get_message_arrow("Topic1", 1, 2, end_offset=5)
    assert batch.column("queue_offset").to_pylist() == [2, 3, 4]
    assert nxt == 5
    batch, nxt = store.get_message_arrow("Topic1", 1, 2, 2)
    assert batch.column("queue_offset").to_pylist() == [2, 3]
    assert nxt == 4
    batch, nxt = store.get_message_arrow("Topic1", 1, hi + 5)
    assert (batch.num_rows, nxt) == (0, hi + 5)
    # Tag filters: "*" is everything; "TagB" only the TagB messages of the queue.
    everything, _ = store.get_message_arrow("Topic1", 1, 0, tags="*")
    assert everything.num_rows == hi
    tagged, nxt = store.get_message_arrow("Topic1", 1, 0, tags="TagB")
    want = [r.queue_offset for i, r in mine if i % 5 != 0]
    assert tagged.column("queue_offset").to_pylist() == want
    assert set(tagged.column("tags").to_pylist()) == {"TagB"}
    assert nxt == hi
    both, _ = store.get_message_arrow("Topic1", 1, 0, tags="TagA || TagB")
    assert both.num_rows == len(want)
    none, nxt = store.get_message_arrow("Topic1", 1, 0, tags="TagZ")
    assert (none.num_rows, nxt) == (0, hi)


def test_read_consume_queue(store: MessageStore) -> None:
    results = fill(store, 700)  # more units than one 300-unit consume queue file
    units = store.read_consume_queue("Topic0", 0, 0, 10_000)
    assert units.schema == CONSUME_QUEUE_SCHEMA
    mine = [(i, r) for i, r in enumerate(results) if i % 6 == 0]
    assert units.num_rows == len(mine) > 300 // 3
    assert units.column("topic").to_pylist() == ["Topic0"] * len(mine)
    assert units.column("queue_id").to_pylist() == [0] * len(mine)
    assert units.column("queue_offset").to_pylist() == [r.queue_offset for _, r in mine]
    assert units.column("commitlog_offset").to_pylist() == [r.commitlog_offset for _, r in mine]
    assert units.column("size").to_pylist() == [r.wrote_bytes for _, r in mine]
    codes = units.column("tags_code").to_pylist()
    for (i, _), code in zip(mine, codes, strict=True):
        tag = None if i % 5 == 0 else f"Tag{'AB'[i % 2]}"
        assert code == (0 if tag is None else java_hash(tag))
    part = store.read_consume_queue("Topic0", 0, 5, 3)
    assert part.column("queue_offset").to_pylist() == [5, 6, 7]


def java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_read_index(store: MessageStore) -> None:
    results = fill(store, 50)
    index = store.read_index()
    assert index.schema == INDEX_SCHEMA
    msgs = {m.commitlog_offset: m for m in store.scan()}
    # One entry per UNIQ_KEY plus one per KEYS entry.
    assert index.num_rows == sum(1 + len(m.keys) for m in msgs.values())
    rows = index.to_pylist()
    assert {r["commitlog_offset"] for r in rows} == {r.commitlog_offset for r in results}
    for r in rows:
        assert r["slot"] == r["key_hash"] % 1024
        assert 0 <= r["prev_index"] < r["entry"]
        assert r["time_diff_s"] >= 0
    assert [r["entry"] for r in rows] == list(range(1, len(rows) + 1))
    # Following prev_index from a slot's newest entry visits only entries of that slot.
    newest: dict[int, dict[str, Any]] = {}
    for r in rows:
        newest[r["slot"]] = r
    by_entry = {r["entry"]: r for r in rows}
    for head in newest.values():
        e = head
        while e["prev_index"]:
            e = by_entry[e["prev_index"]]
            assert e["slot"] == head["slot"]


def test_arrow_reads_release_the_store(store: MessageStore) -> None:
    fill(store, 3)
    store.close()
    with pytest.raises(StoreClosedError):
        store.read_arrow()
    with pytest.raises(StoreClosedError):
        store.get_message_arrow("Topic0", 0, 0)
    with pytest.raises(StoreClosedError):
        store.read_index()


@pytest.mark.parametrize("max_bytes", [0, 500, 3000])
def test_max_bytes_bounds_batches(store: MessageStore, max_bytes: int) -> None:
    """A batch ends before the record that would take its stored bytes past ``max_bytes``
    (one record at least); the batches together are the same rows (read_arrow and
    get_message_arrow)."""
    results = fill(store)
    whole, _ = read_everything(store, 65536)
    batches, offset = [], 0
    while True:
        batch, offset = store.read_arrow(offset, max_bytes=max_bytes)
        if batch.num_rows == 0:
            break
        sizes = [int(v or 0) for v in batch.column("store_size").to_pylist()]
        assert len(sizes) == 1 or sum(sizes) <= max_bytes
        batches.append(batch)
    assert pa.Table.from_batches(batches, schema=MESSAGE_SCHEMA).equals(whole)
    assert len(batches) > 1
    assert results
    topic, queue = "Topic0", 0
    full, _ = store.get_message_arrow(topic, queue, 0)
    parts, qoff = [], 0
    while True:
        batch, qoff = store.get_message_arrow(topic, queue, qoff, max_bytes=max_bytes)
        if batch.num_rows == 0:
            break
        sizes = [int(v or 0) for v in batch.column("store_size").to_pylist()]
        assert len(sizes) == 1 or sum(sizes) <= max_bytes
        parts.append(batch)
    assert pa.Table.from_batches(parts, schema=MESSAGE_SCHEMA).equals(
        pa.Table.from_batches([full], schema=MESSAGE_SCHEMA)
    )
    with pytest.raises(InvalidMessageError):
        store.read_arrow(0, max_bytes=-1)
