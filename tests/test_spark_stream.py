"""``spark.readStream.format("rocketstore")``: microbatches over the consume queues.

Two ``trigger(availableNow=True)`` runs with one checkpoint read the old messages, then only
the ones put since (including a new queue and a new store); ``maxOffsetsPerTrigger`` splits
the backlog into capped microbatches.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import rocketstore
import rocketstore.spark
from rocketstore.spark._stream import _split_budget

pytestmark = pytest.mark.spark

SMALL_KW: dict[str, Any] = {
    "mapped_file_size_commit_log": 1 << 20,
    "mapped_file_size_consume_queue": 20 * 300,
    "max_hash_slot_num": 512,
    "max_index_num": 2048,
}


def _put(store: Path, topic: str, queue_id: int, start: int, n: int) -> None:
    with rocketstore.MessageStore(store, **SMALL_KW) as s:
        for i in range(start, start + n):
            tag = "" if store.name == "store-00000" else f"{store.name}:"
            s.put(topic, f"{tag}{topic}-{queue_id}-{i}".encode(), queue_id=queue_id)


def _run(spark: SparkSession, root: Path, out: Path, checkpoint: Path, **options: str) -> Any:
    query = (
        spark.readStream.format("rocketstore")
        .options(**options)
        .load(str(root))
        .select("topic", "queue_id", "queue_offset", "body", "store")
        .writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(out))
    )
    query.awaitTermination(180)
    assert query.exception() is None
    return query


def _bodies(spark: SparkSession, out: Path) -> Counter[bytes]:
    return Counter(bytes(r.body) for r in spark.read.parquet(str(out)).select("body").collect())


def test_two_available_now_runs_read_old_then_only_new(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "root"
    first = root / "store-00000"
    _put(first, "A", 0, 0, 10)
    _put(first, "A", 1, 0, 5)
    _put(first, "B", 0, 0, 3)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    q1 = _run(spark, root, out, ckpt)
    old = _bodies(spark, out)
    assert sum(old.values()) == 18
    assert set(old.values()) == {1}
    progress = [p for p in q1.recentProgress if p["numInputRows"]]
    assert sum(p["numInputRows"] for p in progress) == 18

    # New messages: more in an existing queue, a new queue, and a whole new store.
    _put(first, "A", 0, 10, 4)
    _put(first, "C", 2, 0, 2)
    _put(root / "store-00001", "A", 0, 0, 3)

    q2 = _run(spark, root, out, ckpt)
    new_rows = sum(p["numInputRows"] for p in q2.recentProgress)
    assert new_rows == 9, "the second run read old messages again"
    both = _bodies(spark, out)
    assert sum(both.values()) == 27
    assert set(both.values()) == {1}, "a message was read twice"
    added = both - old
    assert sorted(added) == sorted(
        [f"A-0-{i}".encode() for i in range(10, 14)]
        + [b"C-2-0", b"C-2-1"]
        + [f"store-00001:A-0-{i}".encode() for i in range(3)]
    )
    # The checkpointed offsets name (store, topic, queue).
    offsets = sorted(
        (p for p in (ckpt / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    last = json.loads(offsets[-1].read_text().splitlines()[-1])
    assert last == {
        "store-00000": {"A": {"0": 14, "1": 5}, "B": {"0": 3}, "C": {"2": 2}},
        "store-00001": {"A": {"0": 3}},
    }

    # Nothing new: a third run reads nothing.
    q3 = _run(spark, root, out, ckpt)
    assert sum(p["numInputRows"] for p in q3.recentProgress) == 0


def test_max_offsets_per_trigger_and_starting_offsets(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = root / "store-00000"
    _put(store, "A", 0, 0, 20)
    _put(store, "A", 1, 0, 10)
    _put(store, "B", 0, 0, 5)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = _run(
        spark,
        root,
        out,
        ckpt,
        topics="A",
        maxOffsetsPerTrigger="7",
        startingOffsets=json.dumps({"A": {"0": 5}}),
    )
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert len(sizes) >= 4
    assert max(sizes) <= 7
    assert sum(sizes) == 25  # A/0 from 5 (15) + A/1 from 0 (10); B not selected
    got = _bodies(spark, out)
    assert set(got.values()) == {1}
    assert sorted(got) == sorted(
        [f"A-0-{i}".encode() for i in range(5, 20)] + [f"A-1-{i}".encode() for i in range(10)]
    )


def test_latest_start_reads_only_later_messages(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = root / "store-00000"
    _put(store, "A", 0, 0, 6)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q1 = _run(spark, root, out, ckpt, startingOffsets="latest")
    assert sum(p["numInputRows"] for p in q1.recentProgress) == 0
    _put(store, "A", 0, 6, 2)
    _run(spark, root, out, ckpt, startingOffsets="latest")
    assert sorted(_bodies(spark, out)) == [b"A-0-6", b"A-0-7"]


def test_split_budget_is_proportional_and_always_advances() -> None:
    from rocketstore.spark._reader import QueueInfo

    def q(i: int) -> QueueInfo:
        return QueueInfo(".", "/s", "T", i, 0, 0)

    backlog = [(q(0), 0, 90), (q(1), 10, 20), (q(2), 5, 5)]
    assert _split_budget(backlog, 1000) == [90, 10, 0]
    shares = _split_budget(backlog, 10)
    assert sum(shares) == 10
    assert shares[0] == 9
    assert shares[2] == 0
    assert sum(_split_budget([(q(0), 0, 1), (q(1), 0, 1), (q(2), 0, 1)], 1)) == 1
