"""Arrow reads that read only what is asked: ``columns=`` projections, topic/tag filters
applied before the columns are built, and the ``RecordBatchReader`` / ``to_table`` forms.

Every projected or filtered batch is compared with the same rows of the full read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import rocketstore
from rocketstore import _native
from rocketstore.exceptions import InvalidMessageError

NAMES = rocketstore.MESSAGE_SCHEMA.names


@pytest.fixture
def store(tmp_path: Path) -> Any:
    """A store with 3 topics x 2 queues, tags A/B/none, keys on every other message, and
    bodies of mixed sizes (some over 512 B, which the two-thread build splits differently)."""
    s = rocketstore.MessageStore(tmp_path / "s", mapped_file_size_commit_log=1 << 20)
    rows = []
    for i in range(3000):
        rows.append(
            {
                "topic": f"T{i % 3}",
                "queue_id": i // 3 % 2,
                "body": (b"%06d-" % i) * (1 + i % 150),
                "tags": ("TagA", "TagB", None)[i // 3 % 3] if i % 5 else None,
                "keys": [f"k{i}"] if i % 2 else None,
                "properties": {"n": str(i)},
            }
        )
    s.put_batch([{k: v for k, v in r.items() if v is not None} for r in rows])
    s.flush()
    yield s
    s.close()


def _full(s: Any) -> pa.Table:
    table: pa.Table = s.read_arrow_batches().read_all()
    return table


@pytest.mark.parametrize(
    "columns",
    [
        ["body"],
        ["queue_offset", "body"],
        ["tags", "body", "topic"],
        ["properties", "uniq_key", "keys"],
        ["msg_id", "born_host", "store_host", "store_timestamp", "born_timestamp"],
        ["sys_flag", "flag", "body_crc", "store_size", "commitlog_offset", "queue_id"],
        ["reconsume_times", "prepared_transaction_offset"],
        list(reversed(NAMES)),
        [],
    ],
)
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_projection_equals_the_full_read(store: Any, columns: list[str], threads: int) -> None:
    before = _native._arrow_read_threads(threads)
    try:
        full = _full(store)
        got = store.read_arrow_batches(columns=columns, max_bytes=256 << 10).read_all()
        assert got.schema.names == columns
        assert got.num_rows == full.num_rows
        assert got.equals(full.select(columns))
        q = store.get_message_arrow_batches("T1", 1, columns=columns).read_all()
        q_full = store.get_message_arrow_batches("T1", 1).read_all()
        assert q.num_rows == q_full.num_rows > 0
        assert q.equals(q_full.select(columns))
    finally:
        _native._arrow_read_threads(before)


def test_one_batch_of_columns_keeps_offsets_and_ends_like_the_full_read(store: Any) -> None:
    batch, nxt = store.read_arrow(0, max_messages=100, columns=["body"])
    full, full_next = store.read_arrow(0, max_messages=100)
    assert nxt == full_next
    assert batch.num_rows == 100
    assert batch.column("body").equals(full.column("body"))
    batch, nxt = store.get_message_arrow("T0", 0, 5, 7, columns=["queue_offset"])
    assert batch.column(0).to_pylist() == list(range(5, 12))
    assert nxt == 12
    # The end: an empty batch of the projected schema.
    end = store.max_commitlog_offset()
    empty, at = store.read_arrow(end, columns=["body", "topic"])
    assert empty.num_rows == 0
    assert empty.schema.names == ["body", "topic"]
    assert at == end
    empty, _ = store.get_message_arrow("T0", 0, 10**6, columns=["sys_flag"])
    assert empty.num_rows == 0
    assert empty.schema.names == ["sys_flag"]


def test_topic_and_tag_filters_match_filtering_the_full_read(store: Any) -> None:
    full = _full(store)
    for topic, tags in [("T1", None), (None, "TagA"), ("T2", "TagA || TagB"), ("T0", "*")]:
        got = store.read_arrow_batches(
            columns=["commitlog_offset", "tags"], topic=topic, tags=tags, max_messages=97
        ).read_all()
        want = [
            (o, t)
            for o, tp, t in zip(
                full.column("commitlog_offset").to_pylist(),
                full.column("topic").to_pylist(),
                full.column("tags").to_pylist(),
                strict=True,
            )
            if (topic is None or tp == topic)
            and (tags in (None, "*") or t in [x.strip() for x in str(tags).split("||")])
        ]
        assert list(zip(got.column(0).to_pylist(), got.column(1).to_pylist(), strict=True)) == want
        assert want  # every case selects something
    # Filtered-out records do not count towards max_messages: 7 rows of T1, not fewer.
    batch, _ = store.read_arrow(0, max_messages=7, topic="T1", columns=["topic"])
    assert batch.column(0).to_pylist() == ["T1"] * 7
    # No match at all: an empty batch, and the loop ends.
    assert store.read_arrow_batches(topic="Nope").read_all().num_rows == 0


def test_queue_tag_filter_before_the_columns(store: Any) -> None:
    q_full = store.get_message_arrow_batches("T1", 0).read_all()
    got = store.get_message_arrow_batches("T1", 0, columns=["body"], tags="TagB").read_all()
    bodies, tags = q_full["body"].to_pylist(), q_full["tags"].to_pylist()
    want = [b for b, t in zip(bodies, tags, strict=True) if t == "TagB"]
    assert got.column("body").to_pylist() == want
    assert want


def test_readers_to_table_and_consumers(store: Any, tmp_path: Path) -> None:
    full = _full(store)
    assert store.to_table().equals(full)
    assert store.to_table("T2", columns=["body"]).num_rows == 1000
    q = store.to_table("T2", 1, columns=["queue_offset"])
    assert q.column(0).to_pylist() == list(range(q.num_rows))
    reader = store.read_arrow_batches(columns=["topic", "body"], max_messages=500)
    assert reader.schema.names == ["topic", "body"]
    sizes = [b.num_rows for b in reader]
    assert sum(sizes) == 3000
    assert all(n > 0 for n in sizes)
    # The reader is an Arrow stream: put_batch takes it straight into another store.
    with rocketstore.MessageStore(tmp_path / "copy") as copy:
        out = copy.put_batch(store.read_arrow_batches(columns=["topic", "body"]))
        assert out.num_rows == 3000
        assert copy.to_table(columns=["body"]).equals(full.select(["body"]))


def test_bad_columns_are_typed_errors(store: Any) -> None:
    with pytest.raises(InvalidMessageError, match="'nope' is not a message column") as info:
        store.read_arrow(0, columns=["body", "nope"])
    assert info.value.field == "columns"
    with pytest.raises(TypeError, match="not a str"):
        store.get_message_arrow("T0", 0, 0, columns="body")
    with pytest.raises(InvalidMessageError):
        store.read_arrow_batches(columns=["Body"])
    # Repeats are dropped, order kept.
    batch, _ = store.read_arrow(0, max_messages=3, columns=["body", "topic", "body"])
    assert batch.schema.names == ["body", "topic"]


@pytest.mark.parametrize("threads", [2, 3, 4])
@pytest.mark.parametrize(
    "columns", [["body"], ["store_size", "body"], ["tags", "body"], ["msg_id", "queue_offset"]]
)
def test_large_projected_reads_split_between_threads(
    tmp_path: Path, threads: int, columns: list[str]
) -> None:
    """A large projected batch is built by row chunks on several threads (no fallback to
    one thread) and equals the same columns of the one-thread build; a batch of columns
    filled from the stored bytes alone (the bodies, the queue fields) is built on one."""
    with rocketstore.MessageStore(tmp_path / "s") as s:
        n = 24_000
        s.put_batch(
            pa.table(
                {
                    "topic": ["T"] * n,
                    "body": [b"%08d" % i * 25 for i in range(n)],
                    "tags": [("A", "B", None)[i % 3] for i in range(n)],
                }
            )
        )
        s.flush()
        before = _native._arrow_read_threads(1)
        try:
            one_log = s.read_arrow_batches(columns=columns).read_all()
            one_queue = s.get_message_arrow_batches("T", 0, columns=columns).read_all()
            _native._arrow_read_threads(threads)
            builds, fallbacks = _native._arrow_split_counts()
            log = s.read_arrow_batches(columns=columns).read_all()
            queue = s.get_message_arrow_batches("T", 0, columns=columns).read_all()
            after = _native._arrow_split_counts()
        finally:
            _native._arrow_read_threads(before)
        assert log.equals(one_log)
        assert queue.equals(one_queue)
        assert log.num_rows == queue.num_rows == n
        assert after[1] == fallbacks, "a split build fell back to one thread"
        light = {"queue_id", "queue_offset", "commitlog_offset", "store_size", "body"}
        if set(columns) <= light:
            assert after[0] == builds, "a light projection was split"
        else:
            assert after[0] > builds, "no split build"


def test_a_bad_unit_is_the_same_error_with_or_without_a_projection(tmp_path: Path) -> None:
    """The body-only queue read skips decoding the records; a consume queue unit that points
    into the middle of a record is still reported, as the decoding read reports it."""
    path = tmp_path / "s"
    with rocketstore.MessageStore(path) as s:
        s.put_batch([{"topic": "T", "body": b"%d" % i * 40} for i in range(10)])
    cq = path / "consumequeue" / "T" / "0" / ("0" * 20)
    raw = bytearray(cq.read_bytes())
    phy = int.from_bytes(raw[20:28], "big")  # unit 1
    raw[20:28] = (phy + 4).to_bytes(8, "big")
    cq.write_bytes(bytes(raw))
    with rocketstore.MessageStore(path, read_only=True) as s:
        errors = []
        for columns in (None, ["body"], ["queue_offset", "store_size"]):
            with pytest.raises(rocketstore.CorruptionError) as info:
                s.get_message_arrow("T", 0, 0, columns=columns)
            errors.append((info.value.offset, str(info.value)))
        assert errors[0] == errors[1] == errors[2]
        assert errors[0][0] == phy + 4
        # Before the bad unit, the bodies read alike.
        batch, at = s.get_message_arrow("T", 0, 0, 1, columns=["body"])
        assert batch.column(0).to_pylist() == [b"0" * 40]
        assert at == 1
