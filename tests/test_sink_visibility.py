"""Readers never see a half-appended micro-batch of the stream sink: while a batch is being
appended across several stores (or after one died half-way), every reader of the sink root (the
batch data source, the streaming source, the JVM reader's entry point, ``verify``) serves each
store only up to its last committed micro-batch, and never serves the sink's own records."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests._sink_driver import SinkDriver, rows

import rocketstore
import rocketstore.spark
from rocketstore.spark._sink_log import MARKER_TOPIC, last_commit
from rocketstore.spark._stream_writer import FAILPOINT_ENV, store_name
from rocketstore.spark.verify import verify, verify_local


def _half_appended(monkeypatch: pytest.MonkeyPatch, root: Path) -> list[str]:
    """A sink root of 3 stores: batches 0 and 1 committed, batch 2 half-appended (two tasks
    wrote all their rows, the third died after 4 rows). Returns the committed bodies."""
    d = SinkDriver(monkeypatch, str(root), stores="3", queueNums="2")
    committed: list[str] = []
    for b in range(2):
        parts = [rows(f"b{b}p{p}", 10 + p) for p in range(3)]
        d.batch(b, parts)
        committed += [x for p in parts for x in p]
    d.task(2, 0, rows("b2p0", 9))
    d.task(2, 1, rows("b2p1", 9))
    monkeypatch.setenv(FAILPOINT_ENV, "task:2:2:4:raise")
    with pytest.raises(RuntimeError, match="injected"):
        d.task(2, 2, rows("b2p2", 9))
    monkeypatch.delenv(FAILPOINT_ENV)
    # Every store holds rows past its last commit record.
    for i in range(3):
        with rocketstore.MessageStore(root / store_name(i), read_only=True) as s:
            c = last_commit(s)
            assert c is not None
            assert s.max_commitlog_offset() > c.after
    return committed


def test_verify_counts_only_committed_batches(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = tmp_path / "sink"
    committed = _half_appended(monkeypatch, root)
    report = verify_local(root)
    assert report.ok, report.format(examples=5)
    data = [q for q in report.queues if q["topic"] != MARKER_TOPIC]
    assert sum(q["messages"] for q in data) == len(committed)
    assert any("past the last committed micro-batch" in n for n in report.checks["framing"].notes)


@pytest.mark.spark
def test_every_reader_stops_at_the_last_committed_batch(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rocketstore.spark.register(spark)
    parent = tmp_path / "data"
    root = parent / "sink"
    committed = Counter(_half_appended(monkeypatch, root))

    # The batch reader, on the sink root and on a directory above it (the JVM reader, when the
    # connector is in the session, hands both to the Python reader).
    for path in (root, parent):
        got = spark.read.format("rocketstore").load(str(path)).select("topic", "body", "store")
        found = got.collect()
        assert {r.topic for r in found} == {"Orders"}, path
        assert Counter(bytes(r.body).decode() for r in found) == committed, path
    # One store of the root, read by itself: its committed rows only.
    one = spark.read.format("rocketstore").load(str(root / store_name(1))).collect()
    assert Counter(bytes(r.body).decode() for r in one) == Counter(
        bytes(r.body).decode() for r in found if r.store.endswith(store_name(1))
    )

    # The streaming source (one availableNow run).
    out = tmp_path / "out"
    q = (
        spark.readStream.format("rocketstore")
        .load(str(root))
        .select("topic", "body")
        .writeStream.format("parquet")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start(str(out))
    )
    q.awaitTermination(180)
    assert q.exception() is None
    streamed = spark.read.parquet(str(out)).collect()
    assert {r.topic for r in streamed} == {"Orders"}
    assert Counter(bytes(r.body).decode() for r in streamed) == committed

    # verify with the committed rows as the expected source: the half batch is not counted.
    expected = spark.createDataFrame(
        [("Orders", b, f"key-{b}") for b in committed.elements()],
        "topic string, body string, keys string",
    )
    report = verify(spark, str(root), expected=expected)
    assert report.ok, report.format(examples=5)
