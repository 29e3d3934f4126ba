"""The read path from Python: get_message statuses and nextBeginOffset rules, tag expressions,
key queries, offset message ids, offsets by time, delay levels, transactions, statistics, and a
broker-written store served read-only.

Every ``GetMessageStatus`` the store can produce has a test below whose docstring describes the
situation that yields it. Three names exist only for API completeness (the store never returns
them, exactly like RocketMQ 5's ``DefaultMessageStore``):

* ``NO_MATCHED_LOGIC_QUEUE``: RocketMQ 5 creates a missing consume queue on lookup, so an unknown
  queue answers ``NO_MESSAGE_IN_QUEUE`` (:func:`test_no_message_in_queue`).
* ``OFFSET_FOUND_NULL``: answered when the consume queue file holding a valid offset is gone.
  Here the queue's min offset is clamped to its first file, so a deleted file moves the min at
  once and the answer is ``OFFSET_TOO_SMALL``; a gap inside the file sequence is refused at
  open (``UnsupportedFormatError``). It can only come from a race between cleanup and a read
  (:func:`test_statuses_the_store_never_returns`).
* ``OFFSET_RESET``: broker layer only.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.rmq_fixture import require_java, write_broker_store

import rocketstore
from rocketstore import GetMessageStatus, GetResult, MessageStore, PutResult
from rocketstore.exceptions import (
    InvalidMessageError,
    OffsetOutOfRangeError,
    StoreReadOnlyError,
    UnsupportedFormatError,
)

S = GetMessageStatus

#: Small files; dispatch runs inline with the put (no service threads), so a read right after a
#: put sees it.
CONFIG: dict[str, Any] = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 300 * 20,
    "max_hash_slot_num": 1000,
    "max_index_num": 4000,
    "background_threads": False,
}

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


@pytest.fixture
def store(store_dir: Path) -> Iterator[MessageStore]:
    with MessageStore(store_dir, **CONFIG) as s:
        yield s


def put_n(store: MessageStore, n: int, topic: str = "T", **kwargs: Any) -> list[PutResult]:
    out = [store.put(topic, f"m{i}".encode(), **kwargs) for i in range(n)]
    assert all(r.ok for r in out)
    return out


def bodies(r: GetResult) -> list[bytes]:
    return [m.body for m in r.messages]


# ---- statuses ---------------------------------------------------------------------------


def test_found(store: MessageStore) -> None:
    """FOUND: the queue holds messages at the offset. ``next_begin_offset`` is one past the last
    entry looked at; ``min_offset``/``max_offset`` are the queue's bounds."""
    puts = put_n(store, 10)
    r = store.get_message("T", 0, 0, 4)
    assert r.status is S.FOUND
    assert r.status == "FOUND"
    assert isinstance(r.status, str)
    assert bodies(r) == [b"m0", b"m1", b"m2", b"m3"]
    assert (r.next_begin_offset, r.min_offset, r.max_offset) == (4, 0, 10)
    assert len(r) == 4
    assert [m.commitlog_offset for m in r.messages] == [p.commitlog_offset for p in puts[:4]]
    r = store.get_message("T", 0, 8, 32)
    assert bodies(r) == [b"m8", b"m9"]
    assert r.next_begin_offset == 10
    assert "FOUND" in repr(r)


def test_no_message_in_queue(store: MessageStore) -> None:
    """NO_MESSAGE_IN_QUEUE: the queue never held a message. An unknown queue answers the same
    (RocketMQ 5 creates it on lookup; NO_MATCHED_LOGIC_QUEUE is never returned), with
    ``next_begin_offset`` 0 and bounds 0."""
    r = store.get_message("Nothing", 3, 0)
    assert r.status is S.NO_MESSAGE_IN_QUEUE
    assert (r.next_begin_offset, r.min_offset, r.max_offset, r.messages) == (0, 0, 0, [])
    put_n(store, 2, queue_id=1)
    r = store.get_message("T", 0, 5)  # another queue of a known topic
    assert r.status is S.NO_MESSAGE_IN_QUEUE
    assert r.next_begin_offset == 0


def test_offset_overflow_one(store: MessageStore) -> None:
    """OFFSET_OVERFLOW_ONE: the offset is exactly the queue's end (the next offset to be
    written); nothing new yet. ``next_begin_offset`` stays at the offset."""
    put_n(store, 3)
    r = store.get_message("T", 0, 3)
    assert r.status is S.OFFSET_OVERFLOW_ONE
    assert (r.next_begin_offset, r.max_offset, r.messages) == (3, 3, [])


def test_offset_overflow_badly(store: MessageStore) -> None:
    """OFFSET_OVERFLOW_BADLY: the offset is beyond the queue's end (e.g. a consumer offset from
    another store). ``next_begin_offset`` is corrected to the queue's end."""
    put_n(store, 3)
    r = store.get_message("T", 0, 100)
    assert r.status is S.OFFSET_OVERFLOW_BADLY
    assert (r.next_begin_offset, r.messages) == (3, [])


def test_offset_too_small_for_a_negative_offset(store: MessageStore) -> None:
    """OFFSET_TOO_SMALL: an offset below the queue's first offset (here: negative);
    ``next_begin_offset`` is the queue's min."""
    put_n(store, 3)
    r = store.get_message("T", 0, -1)
    assert r.status is S.OFFSET_TOO_SMALL
    assert r.next_begin_offset == 0


def write_400(root: Path) -> list[PutResult]:
    """400 messages of about 1 KiB in queue ("T", 0): 64 KiB commit log files hold about 58 each
    (7 files); the consume queue has 2 files of 300 units."""
    with MessageStore(root, **CONFIG) as s:
        puts = [s.put("T", b"x" * 1000, tags="TagA", keys=[f"k{i}"]) for i in range(400)]
        assert len(s.commitlog_files()) >= 7
    return puts


def remove_commitlog_files(root: Path, count: int) -> None:
    for i in range(count):
        (root / "commitlog" / f"{i * 64 * 1024:020d}").unlink()


def test_offset_too_small_after_the_first_commitlog_file_is_gone(store_dir: Path) -> None:
    """OFFSET_TOO_SMALL: the first commit log file was deleted (as cleanup does), so at open
    the queue's min moves to the first unit whose record still exists; an offset below it
    answers OFFSET_TOO_SMALL with ``next_begin_offset`` = min. Served read-only."""
    puts = write_400(store_dir)
    remove_commitlog_files(store_dir, 1)
    first_kept = next(i for i, p in enumerate(puts) if p.commitlog_offset >= 64 * 1024)
    with MessageStore(store_dir, read_only=True, **CONFIG) as ro:
        assert ro.min_offset_in_queue("T", 0) == first_kept
        r = ro.get_message("T", 0, 0)
        assert r.status is S.OFFSET_TOO_SMALL
        assert (r.next_begin_offset, r.min_offset) == (first_kept, first_kept)
        r = ro.get_message("T", 0, r.next_begin_offset)
        assert r.status is S.FOUND
        assert r.messages[0].queue_offset == first_kept
        assert ro.get_earliest_message_time("T", 0) == puts[first_kept].store_timestamp
        batch, _ = ro.get_message_arrow("T", 0, 0, 5)
        assert batch.column("queue_offset").to_pylist() == list(range(first_kept, first_kept + 5))


def test_message_was_removing(store_dir: Path) -> None:
    """MESSAGE_WAS_REMOVING: the consume queue still has units whose records are deleted. With
    the first 6 commit log files gone, every unit of the first consume queue file (offsets
    0..300) points below the commit log's min; the min correction only searches that first file
    (RocketMQ's ``correctMinOffset``), finds nothing and leaves the min at 0 until consume queue
    cleanup deletes the file. A read at 0 skips the whole file (``next_begin_offset`` 300);
    the next read finds messages again."""
    puts = write_400(store_dir)
    remove_commitlog_files(store_dir, 6)
    with MessageStore(store_dir, read_only=True, **CONFIG) as ro:
        min_phy = ro.min_commitlog_offset()
        assert puts[299].commitlog_offset < min_phy
        assert ro.min_offset_in_queue("T", 0) == 0
        r = ro.get_message("T", 0, 0)
        assert r.status is S.MESSAGE_WAS_REMOVING
        assert (r.messages, r.next_begin_offset) == ([], 300)
        r = ro.get_message("T", 0, 300)
        assert r.status is S.FOUND
        first_alive = next(i for i, p in enumerate(puts) if p.commitlog_offset >= min_phy)
        assert r.messages[0].queue_offset == first_alive
        # The Arrow read skips the dead units.
        batch, _ = ro.get_message_arrow("T", 0, 0, 3)
        assert batch.column("queue_offset").to_pylist() == list(range(first_alive, first_alive + 3))


def test_no_matched_message(store: MessageStore) -> None:
    """NO_MATCHED_MESSAGE: entries were scanned but none matched the tag expression.
    ``next_begin_offset`` moves past the scanned entries, so the consumer does not scan them
    again."""
    put_n(store, 5, tags="TagA")
    r = store.get_message("T", 0, 0, 32, tags="TagB")
    assert r.status is S.NO_MATCHED_MESSAGE
    assert (r.messages, r.next_begin_offset) == ([], 5)
    put_n(store, 1, tags="TagB")
    r = store.get_message("T", 0, r.next_begin_offset, 32, tags="TagB")
    assert r.status is S.FOUND
    assert [m.tags for m in r.messages] == ["TagB"]


def test_statuses_the_store_never_returns() -> None:
    """OFFSET_FOUND_NULL, NO_MATCHED_LOGIC_QUEUE and OFFSET_RESET exist for API completeness
    (see the module docstring for why the store never returns them); a consume queue with a
    missing middle file, the one way to ask for OFFSET_FOUND_NULL on disk, is refused at open
    (:func:`test_consume_queue_gap_is_refused`)."""
    names = [s.name for s in S]
    assert names == [
        "FOUND",
        "NO_MATCHED_MESSAGE",
        "MESSAGE_WAS_REMOVING",
        "OFFSET_FOUND_NULL",
        "OFFSET_OVERFLOW_BADLY",
        "OFFSET_OVERFLOW_ONE",
        "OFFSET_TOO_SMALL",
        "NO_MATCHED_LOGIC_QUEUE",
        "NO_MESSAGE_IN_QUEUE",
        "OFFSET_RESET",
    ]
    assert all(s.value == s.name for s in S)
    assert S("OFFSET_FOUND_NULL") is S.OFFSET_FOUND_NULL


def test_consume_queue_gap_is_refused(store_dir: Path) -> None:
    """A consume queue whose middle file is missing is refused at open rather than served with
    OFFSET_FOUND_NULL."""
    with MessageStore(store_dir, **CONFIG) as s:
        put_n(s, 700)
    (store_dir / "consumequeue" / "T" / "0" / f"{6000:020d}").unlink()
    with pytest.raises(UnsupportedFormatError):
        MessageStore(store_dir, read_only=True, **CONFIG)


# ---- reading options -------------------------------------------------------------------------


def test_tag_expressions(store: MessageStore) -> None:
    """``"*"`` (and None, and "") match everything; ``"TagA || TagB"`` matches either tag;
    messages without tags match only ``"*"``."""
    for i, tag in enumerate(["TagA", "TagB", "TagC", None, "TagA"]):
        store.put("T", f"m{i}".encode(), tags=tag)
    for expr in (None, "*", ""):
        assert bodies(store.get_message("T", 0, 0, tags=expr)) == [
            b"m0",
            b"m1",
            b"m2",
            b"m3",
            b"m4",
        ]
    r = store.get_message("T", 0, 0, tags="TagA || TagB")
    assert bodies(r) == [b"m0", b"m1", b"m4"]
    assert r.next_begin_offset == 5
    assert bodies(store.get_message("T", 0, 0, tags="TagC")) == [b"m2"]
    assert bodies(store.get_message("T", 0, 0, tags=" TagB ||TagC ")) == [b"m1", b"m2"]


def test_max_messages_and_max_total_bytes(store: MessageStore) -> None:
    puts = put_n(store, 20)
    r = store.get_message("T", 0, 0, 3)
    assert len(r.messages) == 3
    size = puts[0].wrote_bytes
    r = store.get_message("T", 0, 0, 32, max_total_bytes=size * 2)
    assert 1 <= len(r.messages) <= 2
    assert r.next_begin_offset == len(r.messages)


# ---- keys, ids, times ------------------------------------------------------------------------


def test_query_message_filters_collisions(store: MessageStore) -> None:
    """The keys "T#Aa" and "T#BB" share an index hash, so the index chain returns both
    records; only the one whose key really is "Aa" comes back."""
    a = store.put("T", b"aa", keys=["Aa", "shared"])
    b = store.put("T", b"bb", keys=["BB", "shared"])
    store.put("Other", b"other", keys=["Aa"])
    [m] = store.query_message("T", "Aa")
    assert m.commitlog_offset == a.commitlog_offset
    [m] = store.query_message("T", "BB")
    assert m.commitlog_offset == b.commitlog_offset
    shared = store.query_message("T", "shared")
    assert [m.body for m in shared] == [b"aa", b"bb"]
    assert store.query_message("T", "nope") == []
    # The UNIQ_KEY is indexed too.
    uniq = store.look_message_by_offset(a.commitlog_offset).uniq_key
    assert uniq is not None
    assert [m.body for m in store.query_message("T", uniq)] == [b"aa"]


def test_query_message_topic_is_the_callers_str(store: MessageStore) -> None:
    """Every message found is of the queried topic, so it carries the very ``str`` passed in
    (equal to its stored topic); a non-``str`` topic is a TypeError."""
    for topic in ("TA", "Other_Topic-2"):
        store.put(topic, b"x", keys=["k"])
        name = "".join(list(topic))  # a fresh object, not the literal
        assert name is not topic
        [m] = store.query_message(name, "k")
        assert m.topic is name
        assert m.topic == topic
        assert m.body == b"x"
    with pytest.raises(TypeError):
        store.query_message(b"T", "k")  # type: ignore[arg-type]


def test_query_message_max_num_and_time_window(store: MessageStore) -> None:
    """``max_num`` caps the result; ``begin``/``end`` select by store time at the index's
    one-second resolution (an entry stores its time as whole seconds after its file's begin
    timestamp, as in RocketMQ)."""
    puts = put_n(store, 10, keys=["same"])
    found = store.query_message("T", "same")
    assert [m.commitlog_offset for m in found] == [p.commitlog_offset for p in puts]
    assert len(store.query_message("T", "same", max_num=3)) == 3
    first, last = puts[0].store_timestamp, puts[-1].store_timestamp
    assert len(store.query_message("T", "same", begin=first - 1000, end=last + 1000)) == 10
    assert store.query_message("T", "same", end=first - 5000) == []
    assert store.query_message("T", "same", begin=last + 5000) == []


def test_query_message_without_index(store_dir: Path) -> None:
    with MessageStore(store_dir, **{**CONFIG, "message_index_enable": False}) as s:
        s.put("T", b"x", keys=["k"])
        with pytest.raises(InvalidMessageError):
            s.query_message("T", "k")


def test_query_messages_answers_each_key_as_query_message(store: MessageStore) -> None:
    """A batch lookup gives, per key and in the keys' order, what ``query_message`` gives for
    that key alone: unique and shared keys, the colliding pair "Aa"/"BB", UNIQ_KEYs, missing
    and empty keys, ``max_num`` and a time window; every message found carries the caller's
    topic ``str``."""
    puts = [store.put("T", f"m{i}".encode(), keys=[f"k{i}", f"shared{i % 3}"]) for i in range(200)]
    store.put("T", b"aa", keys=["Aa"])
    store.put("T", b"bb", keys=["BB"])
    store.put("Other", b"other", keys=["k1"])
    uniq = store.look_message_by_offset(puts[5].commitlog_offset).uniq_key
    assert uniq is not None
    keys = [f"k{i}" for i in range(0, 200, 3)] + ["shared0", "Aa", "BB", "nope", "", uniq, "k1"]
    last = puts[-1].store_timestamp
    cases: list[dict[str, Any]] = [{}, {"max_num": 2}, {"begin": last + 5000}]
    for kwargs in cases:
        topic = "".join(list("T"))
        found = store.query_messages(topic, keys, **kwargs)
        assert len(found) == len(keys)
        for key, ms in zip(keys, found, strict=True):
            alone = store.query_message("T", key, **kwargs)
            assert [m.commitlog_offset for m in ms] == [m.commitlog_offset for m in alone]
            assert [m.body for m in ms] == [m.body for m in alone]
            assert all(m.topic is topic for m in ms)
    [[a], [b], [k1]] = store.query_messages("T", ("Aa", "BB", "k1"))
    assert (a.body, b.body, k1.body) == (b"aa", b"bb", b"m1")
    assert store.query_messages("T", []) == []
    with pytest.raises(TypeError):
        store.query_messages("T", "k1")
    with pytest.raises(TypeError):
        store.query_messages("T", [b"k1"])  # type: ignore[list-item]


def test_query_messages_without_index(store_dir: Path) -> None:
    with MessageStore(store_dir, **{**CONFIG, "message_index_enable": False}) as s:
        s.put("T", b"x", keys=["k"])
        with pytest.raises(InvalidMessageError):
            s.query_messages("T", ["k"])


def test_view_message_by_id(store: MessageStore) -> None:
    puts = put_n(store, 5, keys=["k"])
    for p in puts:
        m = store.view_message_by_id(p.msg_id)
        assert (m.commitlog_offset, m.msg_id) == (p.commitlog_offset, p.msg_id)
        assert store.view_message_by_id(p.msg_id.lower()).msg_id == p.msg_id
    with pytest.raises(InvalidMessageError):
        store.view_message_by_id("not-an-id")
    beyond = puts[0].msg_id[:-16] + f"{store.max_commitlog_offset() + 100:016X}"
    with pytest.raises(OffsetOutOfRangeError):
        store.view_message_by_id(beyond)


def test_offset_in_queue_by_time(store: MessageStore) -> None:
    """LOWER: the first offset stored at or after the time; UPPER: the last one stored at or
    before it. Times outside the queue clamp to its bounds."""
    puts: list[PutResult] = []
    for _ in range(4):
        puts += put_n(store, 3)
        time.sleep(0.01)
    stamps = [p.store_timestamp for p in puts]
    for t in [*sorted(set(stamps)), stamps[0] - 1, stamps[-1] + 1, stamps[5] + 1]:
        lower = next((i for i, s in enumerate(stamps) if s >= t), len(stamps))
        upper = max((i for i, s in enumerate(stamps) if s <= t), default=0)
        assert store.get_offset_in_queue_by_time("T", 0, t) == lower, t
        assert store.get_offset_in_queue_by_time("T", 0, t, "lower") == lower, t
        assert store.get_offset_in_queue_by_time("T", 0, t, boundary="upper") == upper, t
    assert store.get_offset_in_queue_by_time("Unknown", 0, stamps[0]) == 0
    with pytest.raises(InvalidMessageError) as info:
        store.get_offset_in_queue_by_time("T", 0, 0, "middle")  # type: ignore[arg-type]
    assert info.value.field == "boundary"


def test_queue_bounds_and_timestamps(store: MessageStore) -> None:
    puts = put_n(store, 4, queue_id=2)
    assert store.min_offset_in_queue("T", 2) == 0
    assert store.max_offset_in_queue("T", 2) == 4
    assert store.min_offset_in_queue("T", 0) == store.max_offset_in_queue("T", 0) == 0
    assert store.get_earliest_message_time("T", 2) == puts[0].store_timestamp
    assert store.get_message_store_timestamp("T", 2, 3) == puts[3].store_timestamp
    assert store.get_message_store_timestamp("T", 2, 4) == -1
    assert store.get_earliest_message_time("Unknown", 0) == -1
    put_n(store, 1, topic="A")
    assert store.consume_queues() == [("A", 0, 0, 1), ("T", 2, 0, 4)]


# ---- delay and transactions ------------------------------------------------------------------


def test_delay_level_goes_to_the_schedule_topic(store: MessageStore) -> None:
    """A delayed put is stored in SCHEDULE_TOPIC_XXXX queue ``level - 1`` with REAL_TOPIC,
    REAL_QID and DELAY; its consume queue tagsCode is the delivery time (store time + delay)."""
    r = store.put("T", b"later", queue_id=3, tags="TagA", delay_level=3)
    assert r.ok
    assert store.max_offset_in_queue("T", 3) == 0
    got = store.get_message(SCHEDULE_TOPIC, 2, 0)
    assert got.status is S.FOUND
    [m] = got.messages
    assert (m.topic, m.queue_id, m.queue_offset, m.body) == (SCHEDULE_TOPIC, 2, 0, b"later")
    assert m.properties["REAL_TOPIC"] == "T"
    assert m.properties["REAL_QID"] == "3"
    assert m.properties["DELAY"] == "3"
    assert m.tags == "TagA"
    [unit] = store.read_consume_queue(SCHEDULE_TOPIC, 2).to_pylist()
    assert unit["tags_code"] == r.store_timestamp + 10_000  # level 3 = 10 s
    # The delay queue numbers its own offsets; levels above the table clamp to the last one.
    assert store.put("T", b"x", delay_level=3).queue_offset == 1
    store.put("T", b"max", delay_level=99)
    assert bodies(store.get_message(SCHEDULE_TOPIC, 17, 0)) == [b"max"]


def test_delay_and_transaction_in_put_batch(store: MessageStore) -> None:
    half = store.put("T", b"half", transaction="prepared")
    results = store.put_batch(
        [
            {"topic": "T", "body": b"d", "delay_level": 2},
            {
                "topic": "T",
                "body": b"c",
                "transaction": "commit",
                "prepared_transaction_offset": half.commitlog_offset,
            },
        ]
    )
    assert [r.ok for r in results] == [True, True]
    table = pa.table(
        {
            "topic": ["T", "T", "T"],
            "body": [b"a1", b"a2", b"a3"],
            "delay_level": pa.array([1, None, 0], pa.int8()),
            "transaction": [None, "rollback", None],
            "prepared_transaction_offset": [0, half.commitlog_offset, None],
        }
    )
    out = store.put_batch(table)
    assert out.column("status").to_pylist() == ["PUT_OK"] * 3
    msgs = {m.body: m for m in store.scan()}
    assert msgs[b"d"].topic == SCHEDULE_TOPIC
    assert msgs[b"d"].queue_id == 1
    assert msgs[b"c"].sys_flag & 0xC == 0x8
    assert msgs[b"c"].prepared_transaction_offset == half.commitlog_offset
    assert msgs[b"a1"].topic == SCHEDULE_TOPIC
    assert msgs[b"a1"].queue_id == 0
    assert msgs[b"a2"].sys_flag & 0xC == 0xC
    assert msgs[b"a2"].prepared_transaction_offset == half.commitlog_offset
    assert msgs[b"a3"].topic == "T"
    with pytest.raises(InvalidMessageError) as info:
        store.put_batch(
            [{"topic": "T", "body": b"x"}, {"topic": "T", "body": b"y", "transaction": "x"}]
        )
    assert info.value.field == "transaction"
    assert "message 1" in str(info.value)
    with pytest.raises(InvalidMessageError) as info:
        store.put_batch(pa.table({"topic": ["T"], "body": [b"x"], "transaction": ["nope"]}))
    assert info.value.field == "transaction"


def test_transaction_types(store: MessageStore) -> None:
    """Spec §12.2: PREPARED and ROLLBACK records get QUEUEOFFSET 0, no queue offset increment and
    no consume queue unit; COMMIT records are dispatched like ordinary ones. PREPARED records are
    indexed, ROLLBACK ones are not."""
    a = store.put("T", b"a")
    half = store.put("T", b"half", keys=["tx-half"], transaction="prepared")
    commit = store.put(
        "T",
        b"commit",
        keys=["tx-commit"],
        transaction="commit",
        prepared_transaction_offset=half.commitlog_offset,
    )
    rollback = store.put(
        "T",
        b"rollback",
        keys=["tx-rollback"],
        transaction="rollback",
        prepared_transaction_offset=half.commitlog_offset,
    )
    b = store.put("T", b"b")
    assert [r.queue_offset for r in (a, half, commit, rollback, b)] == [0, 0, 1, 0, 2]
    assert store.max_offset_in_queue("T", 0) == 3
    assert bodies(store.get_message("T", 0, 0)) == [b"a", b"commit", b"b"]
    flags = {m.body: m.sys_flag & 0xC for m in store.scan()}
    assert flags == {b"a": 0, b"half": 0x4, b"commit": 0x8, b"rollback": 0xC, b"b": 0}
    m = store.look_message_by_offset(commit.commitlog_offset)
    assert m.prepared_transaction_offset == half.commitlog_offset
    assert [m.body for m in store.query_message("T", "tx-half")] == [b"half"]
    assert [m.body for m in store.query_message("T", "tx-commit")] == [b"commit"]
    assert store.query_message("T", "tx-rollback") == []
    with pytest.raises(InvalidMessageError) as info:
        store.put("T", b"x", transaction="maybe")  # type: ignore[arg-type]
    assert info.value.field == "transaction"


# ---- statistics, offsets, read-only ------------------------------------------------------------


def test_stats(store: MessageStore) -> None:
    put_n(store, 3)
    put_n(store, 2, topic="U")
    store.get_message("T", 0, 0, 2)
    s = store.stats()
    assert s["put_by_topic"]["T"]["messages"] == 3
    assert s["put_by_topic"]["U"]["messages"] == 2
    assert s["get_by_topic"]["T"]["messages"] == 2
    assert s["get_by_topic"]["T"]["bytes"] > 0
    assert sum(s["put_latency"].values()) >= 2
    assert "[0~10ms]" in s["put_latency"]
    for key in (
        "flush_count",
        "flush_behind_bytes",
        "writeback_started_bytes",
        "dispatch_behind_bytes",
        "dispatched_messages",
        "commitlog_files",
        "consume_queues",
        "index_files",
        "waiting_pulls",
        "writer_created_files",
    ):
        assert isinstance(s[key], int), key
    assert s["consume_queues"] == 2
    assert s["dispatched_messages"] == 5
    assert s["waiting_pulls"] == 0


def test_read_only_refuses_commit_offset(store_dir: Path) -> None:
    with MessageStore(store_dir, **CONFIG) as s:
        put_n(s, 2)
        s.commit_offset("g", "T", 0, 2)
    with MessageStore(store_dir, read_only=True, **CONFIG) as ro:
        assert ro.query_offset("g", "T", 0) == 2
        assert bodies(ro.get_message("T", 0, 0)) == [b"m0", b"m1"]
        with pytest.raises(StoreReadOnlyError):
            ro.commit_offset("g", "T", 0, 1)


def _queue_messages(store: MessageStore, topic: str, queue_id: int, start: int) -> list[Any]:
    out = []
    offset = start
    end = store.max_offset_in_queue(topic, queue_id)
    while offset < end:
        r = store.get_message(topic, queue_id, offset, 32)
        out += r.messages
        assert r.next_begin_offset > offset, r
        offset = r.next_begin_offset
    return out


def test_broker_written_store_read_only(tmp_path: Path, tree_digest: Any) -> None:
    """A store written by the independent Java broker writer (scenario "full": delays,
    transactions, batches, IPv6 hosts, pre-filled queues, retry/DLQ topics) opened read-only:
    get_message over every queue, query_message for every indexed key and view_message_by_id
    for every record give exactly the manifest's records, and no byte changes."""
    require_java()
    root = tmp_path / "broker"
    manifest = write_broker_store(root, "full")
    records = manifest["records"]
    before = tree_digest(root)
    geometry = {
        "max_hash_slot_num": manifest["index_slots"],
        "max_index_num": manifest["index_entries"],
    }
    with MessageStore(root, read_only=True, **geometry) as ro:
        # Every queue: the dispatched records, in queue order.
        for topic, queues in manifest["queues"].items():
            for qid, info in queues.items():
                queue_id = int(qid)
                assert ro.max_offset_in_queue(topic, queue_id) == info["max"]
                # From the broker's min: in a pre-filled queue the store reports a min inside
                # the pre-fill range (spec §5.4), and a read there skips, as in RocketMQ, every
                # unit in the commit log file of the pre-fill units' offset 0.
                got = _queue_messages(ro, topic, queue_id, info["min"])
                want = [
                    r
                    for r in records
                    if r["dispatched"]
                    and (r["topic"], r["queue_id"]) == (topic, queue_id)
                    and r["queue_offset"] >= info["min"]
                ]
                want_offsets = [r["commitlog_offset"] for r in want]
                assert [m.commitlog_offset for m in got] == want_offsets, (topic, queue_id)
                assert [m.queue_offset for m in got] == [r["queue_offset"] for r in want]
        # Every indexed key.
        by_key: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            for k in r["indexed_keys"]:
                by_key.setdefault(k, []).append(r)
        assert by_key
        for indexed, recs in by_key.items():
            topic, key = indexed.split("#", 1)
            got = ro.query_message(topic, key, max_num=64)
            want = sorted({r["commitlog_offset"] for r in recs})
            if len(want) <= 64:
                assert [m.commitlog_offset for m in got] == want, indexed
            else:
                assert {m.commitlog_offset for m in got} <= set(want)
        # Every record by its offset message id.
        for r in records:
            m = ro.view_message_by_id(r["msg_id"])
            assert (m.commitlog_offset, m.topic, m.msg_id) == (
                r["commitlog_offset"],
                r["topic"],
                r["msg_id"],
            )
            assert m.properties == r["properties"]
        # Consumer offsets written by the broker.
        for key, table in manifest["consumer_offsets"].items():
            topic, group = key.rsplit("@", 1)
            for qid, offset in table.items():
                assert ro.query_offset(group, topic, int(qid)) == offset
        # The Arrow read of the whole log matches the manifest too.
        offset, seen = 0, []
        while True:
            batch, offset = ro.read_arrow(offset, max_messages=100, verify_crc=True)
            if batch.num_rows == 0:
                break
            seen += batch.column("commitlog_offset").to_pylist()
        assert seen == [r["commitlog_offset"] for r in records]
    assert tree_digest(root) == before


def test_package_exports() -> None:
    assert rocketstore.GetMessageStatus is GetMessageStatus
    assert rocketstore.GetResult is GetResult
    assert issubclass(GetMessageStatus, str)


def test_message_too_large_names_the_row(store_dir: Path) -> None:
    """In a batch, MessageTooLargeError says which message (``.index``); a single put has
    ``index`` None."""
    from rocketstore.exceptions import MessageTooLargeError

    with MessageStore(store_dir, **{**CONFIG, "max_message_size": 1024}) as s:
        rows = [{"topic": "T", "body": b"x"}, {"topic": "T", "body": b"y" * 2000}]
        with pytest.raises(MessageTooLargeError) as info:
            s.put_batch(rows)
        e = info.value
        assert (e.index, e.field, e.size, e.max) == (1, "body", 2000, 1024)
        assert "message 1" in str(e)
        with pytest.raises(MessageTooLargeError) as info:
            s.put_batch(pa.table({"topic": ["T"] * 3, "body": [b"a", b"b", b"c" * 1025]}))
        assert info.value.index == 2
        with pytest.raises(MessageTooLargeError) as info:
            s.put("T", b"z" * 1025)
        assert info.value.index is None
        assert s.max_commitlog_offset() == 0


# ---- cleanup and offline repair ----------------------------------------------------------


def test_delete_expired_files_moves_the_queue_min(store_dir: Path) -> None:
    """A forced cleanup pass on a live store deletes the oldest commit log files; reads below the
    new min answer OFFSET_TOO_SMALL at once, and the Arrow read starts at the oldest record."""
    with MessageStore(store_dir, **{**CONFIG, "background_threads": True}) as s:
        puts = [s.put("T", b"x" * 1000) for _ in range(300)]
        s.flush()
        deadline = time.monotonic() + 30
        while s.stats()["dispatch_behind_bytes"] > 0:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        files_before = s.commitlog_files()
        report = s.delete_expired_files(force=True)
        assert set(report) >= {
            "commitlog_files_deleted",
            "consume_queue_files_deleted",
            "index_files_deleted",
            "min_commitlog_offset",
            "disk_usage",
            "disk_full",
            "time_to_delete",
            "space_to_delete",
            "clean_immediately",
        }
        deleted = report["commitlog_files_deleted"]
        assert deleted, report
        assert all(isinstance(p, str) for p in deleted)
        assert deleted == files_before[: len(deleted)]
        assert report["min_commitlog_offset"] == s.min_commitlog_offset() > 0
        # The pass measures the real partition (shared with everything else on the machine), so
        # only its consistency with the store's state is asserted, not its value.
        assert s.is_disk_full() == report["disk_full"]
        first = next(
            i for i, p in enumerate(puts) if p.commitlog_offset >= s.min_commitlog_offset()
        )
        assert s.min_offset_in_queue("T", 0) == first
        r = s.get_message("T", 0, 0)
        assert r.status is S.OFFSET_TOO_SMALL
        assert r.next_begin_offset == first
        batch, _ = s.read_arrow(0, max_messages=1)
        assert batch.column("queue_offset").to_pylist() == [first]
    with (
        MessageStore(store_dir, read_only=True, **CONFIG) as ro,
        pytest.raises(StoreReadOnlyError),
    ):
        ro.delete_expired_files()


def test_rebuild_indexes(store_dir: Path) -> None:
    """``rocketstore.rebuild_indexes`` rewrites the consume queues and index files of a closed
    store from its commit log; reads then give the same answers."""
    with MessageStore(store_dir, **CONFIG) as s:
        puts = [s.put("T", f"m{i}".encode(), queue_id=i % 2, keys=[f"k{i}"]) for i in range(50)]
    shutil.rmtree(store_dir / "consumequeue")
    shutil.rmtree(store_dir / "index")
    with MessageStore(store_dir, **CONFIG), pytest.raises(rocketstore.StoreLockedError):
        rocketstore.rebuild_indexes(store_dir, **CONFIG)
    report = rocketstore.rebuild_indexes(str(store_dir), **CONFIG)
    assert report["records"] == report["dispatched"] == 50
    assert report["consume_queues"] == 2
    assert report["end_offset"] == puts[-1].commitlog_offset + puts[-1].wrote_bytes
    assert report["truncated_at"] is None
    with MessageStore(store_dir, read_only=True, **CONFIG) as ro:
        assert ro.max_offset_in_queue("T", 1) == 25
        assert [m.body for m in ro.get_message("T", 1, 0, 3).messages] == [b"m1", b"m3", b"m5"]
        assert [m.body for m in ro.query_message("T", "k7")] == [b"m7"]
