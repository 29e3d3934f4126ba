"""The ``rocketstore`` Spark data source: write (commit protocol, manifest), read, tables.

Every store here uses small files (1 MiB commit log files, small consume queue and index
files); the writer records those options in the manifest and the reader reuses them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from tests.rmq_fixture import require_java, write_broker_store

import rocketstore
from rocketstore.spark import MANIFEST, body_digest
from rocketstore.spark._writer import RocketStoreWriter, StoreCommitMessage

pytestmark = pytest.mark.spark

#: Writer options: small files (and the reader takes them from the manifest).
SMALL = {
    "mappedFileSizeCommitLog": str(1 << 20),
    "mapped_file_size_consume_queue": str(20 * 300),
    "maxHashSlotNum": "512",
    "maxIndexNum": "2048",
}
#: The same, as MessageStore keywords.
SMALL_KW: dict[str, Any] = {
    "mapped_file_size_commit_log": 1 << 20,
    "mapped_file_size_consume_queue": 20 * 300,
    "max_hash_slot_num": 512,
    "max_index_num": 2048,
}

INPUT_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("body", T.BinaryType(), False),
        T.StructField("queue_id", T.IntegerType(), True),
        T.StructField("tags", T.StringType(), True),
        T.StructField("keys", T.ArrayType(T.StringType()), True),
        T.StructField("properties", T.MapType(T.StringType(), T.StringType()), True),
        T.StructField("born_timestamp", T.TimestampType(), True),
    ]
)


def _rows(n: int, seed: int = 0) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(n):
        topic = ("TopicA", "TopicB", "TopicC")[i % 3]
        body = f"body-{seed}-{i}-".encode() + bytes([i % 251]) * (i % 37)
        queue_id = i % 2 if i % 5 == 0 else None  # explicit for some rows, else by key hash
        tags = None if i % 7 == 0 else f"Tag{i % 4}"
        keys = [f"order-{seed}-{i}", f"user-{i % 13}"] if i % 11 else [f"k{seed}-{i}"]
        props = {"source": "test", "n": str(i)} if i % 3 == 0 else None
        born = datetime(2024, 1, 1, tzinfo=UTC).replace(microsecond=(i % 1000) * 1000)
        rows.append((topic, body, queue_id, tags, keys, props, born))
    return rows


def _expected_queue(row: tuple[Any, ...], queue_nums: int = 4) -> int:
    if row[2] is not None:
        return int(row[2])
    return zlib.crc32(" ".join(row[4]).encode()) % queue_nums


def _df(spark: SparkSession, rows: list[tuple[Any, ...]], partitions: int = 3) -> DataFrame:
    return spark.createDataFrame(rows, INPUT_SCHEMA).repartition(partitions)


def _write(df: DataFrame, root: Path, mode: str = "append", **options: str) -> None:
    df.write.format("rocketstore").mode(mode).options(**{**SMALL, **options}).save(str(root))


def _read(spark: SparkSession, path: Path, **options: str) -> DataFrame:
    return spark.read.format("rocketstore").options(**options).load(str(path))


def _stores(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("store-"))


def _digest(bodies: list[bytes]) -> int:
    return sum(int(hashlib.sha256(b).hexdigest()[:15], 16) for b in bodies)


# --------------------------------------------------------------------------------------
# Write -> read
# --------------------------------------------------------------------------------------


def test_write_read_round_trip_and_manifest(
    spark: SparkSession, tmp_path: Path, tree_digest: Callable[[Path], Any]
) -> None:
    rows = _rows(600)
    root = tmp_path / "root"
    _write(_df(spark, rows), root)

    assert _stores(root) == ["store-00000", "store-00001", "store-00002"]
    assert not (root / "_temporary").exists()
    manifest = json.loads((root / MANIFEST).read_text())
    assert manifest["format"] == "rocketstore-spark"
    assert manifest["mode"] == "append"
    assert manifest["totals"]["stores"] == 3
    assert manifest["totals"]["messages"] == 600
    entries = {e["path"]: e for e in manifest["stores"]}
    assert set(entries) == set(_stores(root))

    # Per store: messages, bytes and offsets agree with the store itself.
    queue_counts: Counter[tuple[str, int]] = Counter()
    all_bodies: list[bytes] = []
    for name, e in entries.items():
        assert e["config"]["mapped_file_size_commit_log"] == 1 << 20
        with rocketstore.MessageStore(root / name, read_only=True, **SMALL_KW) as s:
            msgs = list(s.scan())
            assert e["messages"] == len(msgs)
            assert e["bytes"] == sum(m.store_size for m in msgs)
            assert e["min_offset"] == msgs[0].commitlog_offset == 0
            assert e["max_offset"] == s.max_commitlog_offset()
            assert int(e["body_digest"]) == _digest([m.body for m in msgs])
            per_store = Counter((m.topic, m.queue_id) for m in msgs)
            assert {
                t: {str(q): n for (tt, q), n in sorted(per_store.items()) if tt == t}
                for t in {t for t, _ in per_store}
            } == e["queues"]
            queue_counts.update(per_store)
            all_bodies.extend(m.body for m in msgs)
    assert sum(int(e["body_digest"]) for e in entries.values()) == _digest([r[1] for r in rows])

    # Read back: same rows (topic, queue, keys, tags, body), same counts per queue.
    before = tree_digest(root)
    back = _read(spark, root)
    assert back.count() == 600
    got = Counter(
        (r.topic, r.queue_id, r.keys, r.tags, bytes(r.body))
        for r in back.select("topic", "queue_id", "keys", "tags", "body").collect()
    )
    want = Counter((r[0], _expected_queue(r), " ".join(r[4]), r[3], r[1]) for r in rows)
    assert got == want
    per_queue = {
        (r.topic, r.queue_id): r["count"]
        for r in back.groupBy("topic", "queue_id").count().collect()
    }
    assert per_queue == {
        k: sum(n for (t, q), n in queue_counts.items() if (t, q) == k) for k in queue_counts
    }
    # Every field Spark hands back has the right type and value for one row.
    one = back.where("topic = 'TopicA' and properties is not null").limit(1).collect()[0]
    assert one.properties["source"] == "test"
    assert one.born_timestamp.year == 2024
    assert one.store.startswith(str(root))
    assert tree_digest(root) == before, "reading changed the store"


def test_digest_helper_matches_sql(spark: SparkSession) -> None:
    bodies = [b"", b"a", b"hello world", bytes(range(256))]
    assert body_digest(pa.array(bodies)) == _digest(bodies)
    df = spark.createDataFrame([(b,) for b in bodies], "body binary")
    sql = df.selectExpr(
        "sum(cast(conv(substr(sha2(body, 256), 1, 15), 16, 10) as decimal(38, 0))) as d"
    ).collect()[0]["d"]
    assert int(sql) == _digest(bodies)


def test_round_robin_selector_and_timestamp_as_long(spark: SparkSession, tmp_path: Path) -> None:
    df = spark.range(0, 40, numPartitions=1).selectExpr(
        "'RR' as topic", "cast(id as string) as body", "id as born_timestamp"
    )
    root = tmp_path / "rr"
    _write(df, root, queueSelector="round_robin", queueNums="5")
    back = _read(spark, root).select("queue_id", "born_timestamp", "body").collect()
    assert Counter(r.queue_id for r in back) == dict.fromkeys(range(5), 8)
    assert {int(r.born_timestamp.timestamp() * 1000) for r in back} == set(range(40))


def test_append_then_overwrite(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("keep me")
    (root / "other").mkdir()
    (root / "other" / "data.bin").write_bytes(b"keep")

    _write(_df(spark, _rows(60, seed=1), 2), root)
    _write(_df(spark, _rows(90, seed=2), 3), root, mode="append")
    assert _stores(root) == [f"store-{i:05d}" for i in range(5)]
    manifest = json.loads((root / MANIFEST).read_text())
    assert manifest["totals"] == {
        "stores": 5,
        "messages": 150,
        "bytes": manifest["totals"]["bytes"],
    }
    assert len({e["job_id"] for e in manifest["stores"]}) == 2
    assert _read(spark, root).count() == 150

    _write(_df(spark, _rows(30, seed=3), 2), root, mode="overwrite")
    assert _stores(root) == ["store-00000", "store-00001"]
    manifest = json.loads((root / MANIFEST).read_text())
    assert manifest["mode"] == "overwrite"
    assert manifest["totals"]["messages"] == 30
    back = _read(spark, root)
    assert back.count() == 30
    assert {bytes(r.body)[:7] for r in back.select("body").collect()} == {b"body-3-"}
    # Nothing but stores and the manifest was removed.
    assert (root / "notes.txt").read_text() == "keep me"
    assert (root / "other" / "data.bin").read_bytes() == b"keep"
    assert not (root / "_temporary").exists()


def test_bad_row_fails_the_job_and_publishes_nothing(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(_df(spark, _rows(30), 1), root)
    before = (root / MANIFEST).read_text()
    rows = _rows(50, seed=9)
    schema = T.StructType([*INPUT_SCHEMA.fields])
    schema.fields[0].nullable = True
    rows[41] = (None, *rows[41][1:])  # no topic
    bad = spark.createDataFrame(rows, schema).repartition(2)
    with pytest.raises(Exception, match="topic") as info:
        _write(bad, root)
    assert "nothing of this task is published" in str(info.value)
    assert _stores(root) == ["store-00000"]
    assert (root / MANIFEST).read_text() == before
    # Spark aborts the job when the first task fails; the other task may still be running and
    # removes its own attempt (and the then empty `_temporary`) when it stops.
    deadline = time.monotonic() + 60
    while (root / "_temporary").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (root / "_temporary").exists()
    assert _read(spark, root).count() == 30


def test_unknown_columns_and_options_fail_before_tasks(spark: SparkSession, tmp_path: Path) -> None:
    df = spark.range(3).selectExpr("'T' as topic", "cast(id as string) as body", "id as extra")
    with pytest.raises(Exception, match="extra"):
        _write(df, tmp_path / "a")
    ok = df.drop("extra")
    with pytest.raises(Exception, match="mappedFileSizeCommitLog"):
        ok.write.format("rocketstore").mode("append").option(
            "mappedFileSizeComitLog", "1048576"
        ).save(str(tmp_path / "b"))
    no_body = spark.range(3).selectExpr("'T' as topic")
    with pytest.raises(Exception, match="body"):
        _write(no_body, tmp_path / "c")
    wrong_type = spark.range(3).selectExpr("'T' as topic", "id as body")
    with pytest.raises(Exception, match="binary"):
        _write(wrong_type, tmp_path / "d")
    assert not any((tmp_path / d).exists() and any((tmp_path / d).iterdir()) for d in "abcd")


# --------------------------------------------------------------------------------------
# Task attempts: the commit protocol without a cluster
# --------------------------------------------------------------------------------------


class _FakeTaskContext:
    def __init__(self, partition: int, attempt_id: int, attempt_number: int) -> None:
        self._p, self._a, self._n = partition, attempt_id, attempt_number

    def partitionId(self) -> int:
        return self._p

    def taskAttemptId(self) -> int:
        return self._a

    def attemptNumber(self) -> int:
        return self._n


def _batches(partition: int, n: int, fail_after: int | None = None) -> Iterator[pa.RecordBatch]:
    for i in range(0, n, 10):
        if fail_after is not None and i >= fail_after:
            raise RuntimeError("executor lost (simulated)")
        columns: dict[str, list[Any]] = {
            "topic": [f"P{partition}"] * 10,
            "body": [f"{partition}-{j}".encode() for j in range(i, i + 10)],
            "keys": [[f"k{j}"] for j in range(i, i + 10)],
        }
        yield pa.record_batch(columns)


def _writer(root: Path, overwrite: bool = False) -> RocketStoreWriter:
    schema = T.StructType(
        [
            T.StructField("topic", T.StringType()),
            T.StructField("body", T.BinaryType()),
            T.StructField("keys", T.ArrayType(T.StringType())),
        ]
    )
    options = {k.lower(): v for k, v in SMALL.items()} | {"path": str(root)}
    return RocketStoreWriter(options, schema, overwrite)


def _as_task(monkeypatch: pytest.MonkeyPatch, partition: int, attempt: int, number: int) -> None:
    import pyspark

    ctx = _FakeTaskContext(partition, attempt, number)
    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: ctx))


def test_failed_retried_and_speculative_attempts_publish_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    writer = _writer(root)

    # Partition 0, attempt 0: writes 30 rows, then the executor fails mid-task.
    _as_task(monkeypatch, 0, 100, 0)
    with pytest.raises(RuntimeError, match="simulated"):
        writer.write(_batches(0, 50, fail_after=30))
    assert not writer.attempt_dir(0, 100).exists(), "a failed attempt left its store"

    # A killed attempt leaves a half store behind (no cleanup ran).
    half = writer.attempt_dir(0, 101)
    with rocketstore.MessageStore(half, **SMALL_KW) as s:
        s.put("P0", b"half")

    # The retry (attempt 1) and a speculative copy (attempt 2) both finish.
    _as_task(monkeypatch, 0, 102, 1)
    retry = writer.write(_batches(0, 50))
    _as_task(monkeypatch, 0, 103, 2)
    speculative = writer.write(_batches(0, 50))
    _as_task(monkeypatch, 1, 104, 0)
    other = writer.write(_batches(1, 20))
    assert isinstance(retry, StoreCommitMessage)
    assert retry.stats["messages"] == 50

    # Spark commits one attempt per partition.
    writer.commit([retry, other])
    assert speculative.path is not None
    assert _stores(root) == ["store-00000", "store-00001"]
    assert not (root / "_temporary").exists()
    manifest = json.loads((root / MANIFEST).read_text())
    assert [(e["partition"], e["task_attempt"], e["messages"]) for e in manifest["stores"]] == [
        (0, 102, 50),
        (1, 104, 20),
    ]
    with rocketstore.MessageStore(root / "store-00000", read_only=True, **SMALL_KW) as s:
        bodies = [m.body for m in s.scan()]
    assert bodies == [f"0-{j}".encode() for j in range(50)]  # no duplicate, no half store


def test_writer_stages_and_pwrites_by_default_with_the_same_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer opens its stores with ``pwrite_commit_log`` unless the job turns it off; both
    ways publish the same records at the same offsets and byte-identical consume queues."""
    opened: list[bool] = []
    real_open = RocketStoreWriter._open

    def spy(self: RocketStoreWriter, path: Path) -> Any:
        store = real_open(self, path)
        opened.append(bool(store.config["pwrite_commit_log"]))
        return store

    monkeypatch.setattr(RocketStoreWriter, "_open", spy)
    roots = []
    for flag in (None, "false"):
        root = tmp_path / f"root-{flag}"
        writer = _writer(root)
        if flag is not None:
            writer.config["pwrite_commit_log"] = False  # as .option("pwriteCommitLog", "false")
        _as_task(monkeypatch, 0, 7, 0)
        writer.commit([writer.write(_batches(0, 3000))])
        roots.append(root)
        entry = json.loads((root / MANIFEST).read_text())["stores"][0]
        assert "pwrite_commit_log" not in entry["config"] or flag is not None
    assert opened == [True, False]

    def content(root: Path) -> tuple[list[tuple[Any, ...]], dict[str, bytes]]:
        store = root / "store-00000"
        with rocketstore.MessageStore(store, read_only=True, **SMALL_KW) as s:
            rows = [
                (m.commitlog_offset, m.queue_id, m.queue_offset, m.topic, m.body, m.keys)
                for m in s.scan()
            ]
        cq = {
            str(p.relative_to(store)): p.read_bytes()
            for p in sorted((store / "consumequeue").rglob("*"))
            if p.is_file()
        }
        return rows, cq

    staged, mapped = content(roots[0]), content(roots[1])
    assert len(staged[0]) == 3000
    assert staged == mapped


def test_published_clean_store_opens_without_the_tail_crc_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store a committed job published (manifest entry, no abort file) opens for reading
    with its end found by framing alone unless ``verifyCrc`` asks for CRCs: a flipped body
    byte in its last file neither hides the records after it nor goes unnoticed with
    ``verifyCrc``; a store with an abort file keeps the CRC walk."""
    from rocketstore.spark._reader import ReadSettings

    root = tmp_path / "root"
    writer = _writer(root)
    _as_task(monkeypatch, 0, 7, 0)
    writer.commit([writer.write(_batches(0, 50))])
    store = root / "store-00000"
    entry = json.loads((root / MANIFEST).read_text())["stores"][0]
    with rocketstore.MessageStore(store, read_only=True, **SMALL_KW) as s:
        victim = list(s.scan())[20]
    log = sorted((store / "commitlog").iterdir())[-1]
    data = bytearray(log.read_bytes())
    at = data.index(victim.body, victim.commitlog_offset % len(data))  # its body's first byte
    data[at] ^= 0xFF
    log.write_bytes(bytes(data))

    def end(options: dict[str, str]) -> int:
        settings = ReadSettings.parse({"path": str(root), **options})
        with settings.open(store) as s:
            return s.max_commitlog_offset()

    assert end({}) == entry["max_offset"]  # every record, the damaged body as stored
    assert end({"verifyCrc": "true"}) == victim.commitlog_offset  # the CRC walk stops there
    assert end({"checkCRCOnRecover": "true"}) == victim.commitlog_offset
    (store / "abort").write_bytes(b"")
    assert end({}) == victim.commitlog_offset  # not cleanly closed: CRCs checked


def test_first_task_of_a_worker_freezes_its_heap_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first write task collects once and freezes the process's objects (PySpark's
    per-task collection then skips them); later tasks neither collect nor freeze again."""
    import gc

    from rocketstore.spark import _heap

    _heap._reset()
    try:
        assert gc.get_freeze_count() == 0
        writer = _writer(tmp_path / "root")
        _as_task(monkeypatch, 0, 1, 0)
        writer.write(_batches(0, 10))
        frozen = gc.get_freeze_count()
        assert frozen > 0
        calls: list[str] = []

        def collect(*_: object) -> int:
            calls.append("collect")
            return 0

        monkeypatch.setattr(gc, "collect", collect)
        monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
        _as_task(monkeypatch, 1, 2, 0)
        writer.write(_batches(1, 10))
        assert calls == []
    finally:
        monkeypatch.undo()
        _heap._reset()


def test_abort_removes_every_attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    writer = _writer(root)
    messages = []
    for partition in range(2):
        _as_task(monkeypatch, partition, 10 + partition, 0)
        messages.append(writer.write(_batches(partition, 20)))
    assert all(m.path and Path(m.path).is_dir() for m in messages)
    writer.abort([messages[0], None])
    assert not (root / "_temporary").exists()
    assert not (root / MANIFEST).exists()
    assert _stores(root) == []


def test_empty_partition_publishes_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    writer = _writer(root)
    _as_task(monkeypatch, 0, 1, 0)
    empty = writer.write(iter([]))
    _as_task(monkeypatch, 1, 2, 0)
    full = writer.write(_batches(1, 10))
    writer.commit([empty, full])
    assert _stores(root) == ["store-00000"]
    assert json.loads((root / MANIFEST).read_text())["totals"]["messages"] == 10


RETRY_SCRIPT = textwrap.dedent(
    """
    import os, sys, json
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf
    from pyspark import TaskContext

    root, marker = sys.argv[1], sys.argv[2]
    spark = (
        SparkSession.builder.master("local[2,3]")  # 3 attempts per task
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "25")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")

    @udf("binary")
    def body(i):
        ctx = TaskContext.get()
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i == 150:
            open(marker, "w").close()
            raise RuntimeError("planted failure in the first attempt of partition 0")
        return f"b{i}".encode()

    df = spark.range(0, 400, numPartitions=2).selectExpr("'Retry' as topic", "id")
    df = df.withColumn("body", body("id")).drop("id")
    # No `import rocketstore.spark`: the pyspark_rocketstore module registers the source.
    (df.write.format("rocketstore").mode("append")
        .option("mappedFileSizeCommitLog", str(1 << 20))
        .option("mappedFileSizeConsumeQueue", "6000")
        .option("maxHashSlotNum", "512").option("maxIndexNum", "2048").save(root))
    rows = spark.read.format("rocketstore").load(root).select("body").collect()
    print(json.dumps(sorted(bytes(r.body).decode() for r in rows)))
    spark.stop()
    """
)


@pytest.mark.slow
def test_task_retry_in_spark_leaves_no_duplicate(tmp_path: Path) -> None:
    """A real retry (local[2,3]) in a separate Spark application; also checks auto-registration.

    Slow (a second JVM and Spark application, ~30-50 s); the commit protocol itself is covered
    quickly by the simulated-attempt tests above.
    """
    root = tmp_path / "root"
    marker = tmp_path / "failed-once"
    script = tmp_path / "retry.py"
    script.write_text(RETRY_SCRIPT)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(rocketstore.__file__).parents[1]), *sys.path])
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(script), str(root), str(marker)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    print(f"separate Spark application: {time.monotonic() - start:.1f} s")
    assert marker.exists(), "the planted failure did not happen"
    bodies = json.loads(proc.stdout.strip().splitlines()[-1])
    assert bodies == sorted(f"b{i}" for i in range(400))
    assert _stores(root) == ["store-00000", "store-00001"]
    assert not (root / "_temporary").exists()
    manifest = json.loads((root / MANIFEST).read_text())
    assert manifest["totals"]["messages"] == 400
    assert sorted(e["partition"] for e in manifest["stores"]) == [0, 1]


# --------------------------------------------------------------------------------------
# Reading a store written by another implementation
# --------------------------------------------------------------------------------------


def _expected_body(rec: dict[str, Any]) -> bytes:
    if rec.get("body_zero_fill"):
        return bytes(rec["body_len"])
    return base64.b64decode(rec["body_b64"])


def _ms(ts: datetime) -> int:
    return round(ts.timestamp() * 1000)


def test_foreign_store_reads_exactly_and_stays_unchanged(
    spark: SparkSession, tmp_path: Path, tree_digest: Callable[[Path], Any]
) -> None:
    require_java()
    root = tmp_path / "broker"
    manifest = write_broker_store(root, "full")
    before = tree_digest(root)
    geometry = {
        "maxHashSlotNum": str(manifest["index_slots"]),
        "maxIndexNum": str(manifest["index_entries"]),
    }
    df = _read(spark, root, verifyCrc="true", **geometry)
    rows = sorted(df.collect(), key=lambda r: r.commitlog_offset)
    records = manifest["records"]
    assert len(rows) == len(records)
    for r, rec in zip(rows, records, strict=True):
        assert r.commitlog_offset == rec["commitlog_offset"]
        assert r.topic == rec["topic"]
        assert r.queue_id == rec["queue_id"]
        assert r.queue_offset == rec["queue_offset"]
        assert r.store_size == rec["store_size"]
        assert bytes(r.body) == _expected_body(rec)
        assert r.body_crc == rec["body_crc"]
        assert zlib.crc32(bytes(r.body)) & 0x7FFFFFFF == rec["body_crc"] & 0x7FFFFFFF
        assert r.flag == rec["flag"]
        assert r.sys_flag == rec["sys_flag"]
        assert r.tags == rec["tags"]
        assert [k for k in (r.keys or "").split(" ") if k] == rec["keys"]
        assert (r.properties or {}) == rec["properties"]
        assert _ms(r.born_timestamp) == rec["born_timestamp"]
        assert r.born_host == rec["born_host"]
        assert _ms(r.store_timestamp) == rec["store_timestamp"]
        assert r.store_host == rec["store_host"]
        assert r.reconsume_times == rec["reconsume_times"]
        assert r.prepared_transaction_offset == rec["prepared_transaction_offset"]
        assert r.msg_id == rec["msg_id"]
        assert r.uniq_key == rec["uniq_key"]
        assert r.store == str(root)
    # Through the consume queues: exactly the dispatched records of every queue.
    by_queue = _read(spark, root, partitioning="queue", **geometry)
    got = Counter((r.topic, r.queue_id) for r in by_queue.select("topic", "queue_id").collect())
    want = {
        (t, int(q)): info["max"] - info["min"]
        for t, queues in manifest["queues"].items()
        for q, info in queues.items()
        if info["max"] > info["min"]
    }
    assert dict(got) == want
    assert tree_digest(root) == before, "reading a foreign store changed it"


def test_foreign_topics_of_a_crashed_writer_read_exactly(
    spark: SparkSession, tmp_path: Path, tree_digest: Callable[[Path], Any]
) -> None:
    """Topics outside the client's character set (Tópico-中文-😀, café.menu) in a store whose
    writer died (abort file, index behind): both partitionings read every record."""
    require_java()
    root = tmp_path / "crashed"
    manifest = write_broker_store(root, "basic", foreign_topics=True, abort=True, index_lag=50)
    before = tree_digest(root)
    records = manifest["records"]
    rows = sorted(_read(spark, root, verifyCrc="true").collect(), key=lambda r: r.commitlog_offset)
    assert [(r.commitlog_offset, r.topic, r.msg_id) for r in rows] == [
        (rec["commitlog_offset"], rec["topic"], rec["msg_id"]) for rec in records
    ]
    assert {"Tópico-中文-😀", "café.menu"} <= {r.topic for r in rows}
    by_queue = _read(spark, root, partitioning="queue").select("topic", "queue_id").collect()
    assert Counter((r.topic, r.queue_id) for r in by_queue) == Counter(
        (rec["topic"], rec["queue_id"]) for rec in records
    )
    assert tree_digest(root) == before, "reading a foreign store changed it"


# --------------------------------------------------------------------------------------
# Options: topics, offsets, timestamps; consumequeue and index tables
# --------------------------------------------------------------------------------------


@pytest.fixture
def queue_store(tmp_path: Path) -> tuple[Path, int]:
    """One store: topics A (2 queues x 10) and B (1 queue x 5); returns (path, split time).

    Queue A/0 gets offsets 0..4 before the split time and 5..9 after it.
    """
    path = tmp_path / "qs" / "store-00000"
    with rocketstore.MessageStore(path, **SMALL_KW) as s:
        for i in range(5):
            s.put("A", f"a0-{i}".encode(), queue_id=0, keys=[f"ka{i}"], tags="x")
        last = s.look_message_by_offset(s.put("A", b"a0-last-early", queue_id=1).commitlog_offset)
        split = last.store_timestamp + 1
        while int(time.time() * 1000) <= split + 1:
            time.sleep(0.005)
        for i in range(5, 10):
            s.put("A", f"a0-{i}".encode(), queue_id=0, keys=[f"ka{i}"], tags="y")
        for i in range(9):
            s.put("A", f"a1-{i}".encode(), queue_id=1)
        for i in range(5):
            s.put("B", f"b-{i}".encode(), queue_id=0, keys=[f"kb{i}"])
    return path, split


def test_topics_offsets_and_timestamps(spark: SparkSession, queue_store: tuple[Path, int]) -> None:
    path, split = queue_store
    root = path.parent

    def offsets(df: DataFrame) -> list[tuple[str, int, int]]:
        return sorted(
            (r.topic, r.queue_id, r.queue_offset)
            for r in df.select("topic", "queue_id", "queue_offset").collect()
        )

    assert _read(spark, root).count() == 25
    assert {t for t, _, _ in offsets(_read(spark, root, topics="B"))} == {"B"}
    assert len(offsets(_read(spark, root, topics="A, B"))) == 25

    df = _read(
        spark,
        root,
        topics="A",
        startingOffsets=json.dumps({"A": {"0": 2, "1": -1}}),
        endingOffsets=json.dumps({"A": {"0": 5}}),
    )
    assert offsets(df) == [("A", 0, 2), ("A", 0, 3), ("A", 0, 4)]
    qualified = json.dumps({"store-00000": {"A": {"0": 8}}})
    df = _read(spark, root, topics="A", startingOffsets=qualified)
    assert [(q, o) for _, q, o in offsets(df) if q == 0] == [(0, 8), (0, 9)]
    assert _read(spark, root, startingOffsets="latest").count() == 0

    late = offsets(_read(spark, root, topics="A", startingTimestamp=str(split)))
    assert [o for _, q, o in late if q == 0] == list(range(5, 10))
    assert [o for _, q, o in late if q == 1] == list(range(1, 10))
    early = offsets(_read(spark, root, topics="A", endingTimestamp=str(split)))
    assert [o for _, q, o in early if q == 0] == list(range(5))

    with pytest.raises(Exception, match="partitioning=queue"):
        _read(spark, root, partitioning="file", startingOffsets="latest").count()
    with pytest.raises(Exception, match="startingOffsets"):
        _read(spark, root, startingOffsets="{not json").count()


def test_consumequeue_and_index_tables(
    spark: SparkSession, queue_store: tuple[Path, int], tree_digest: Callable[[Path], Any]
) -> None:
    path, _ = queue_store
    before = tree_digest(path)
    messages = _read(spark, path).select("topic", "queue_id", "queue_offset", "commitlog_offset")
    cq = _read(spark, path, table="consumequeue")
    assert cq.columns == [
        "topic",
        "queue_id",
        "queue_offset",
        "commitlog_offset",
        "size",
        "tags_code",
        "store",
    ]
    assert cq.count() == 25
    joined = cq.join(messages, ["topic", "queue_id", "queue_offset", "commitlog_offset"])
    assert joined.count() == 25
    part = _read(spark, path, table="consumequeue", topics="A", startingOffsets='{"A": {"0": 7}}')
    assert sorted(r.queue_offset for r in part.where("queue_id = 0").collect()) == [7, 8, 9]

    # Index geometry is not recorded in the files (nor, here, in a manifest): pass it.
    index = _read(spark, path, table="index", maxHashSlotNum="512", max_index_num="2048")
    assert "key_hash" in index.columns
    assert "store" in index.columns
    entries = index.collect()
    # One entry per key (15 keyed messages) plus one per unique key (every message).
    assert len(entries) == 15 + 25
    offsets = {r.commitlog_offset for r in messages.collect()}
    assert {r.commitlog_offset for r in entries} <= offsets
    assert tree_digest(path) == before


# --------------------------------------------------------------------------------------
# Option parsing (no Spark)
# --------------------------------------------------------------------------------------


def test_options_accept_both_spellings_and_reject_typos() -> None:
    from rocketstore.exceptions import InvalidConfigError
    from rocketstore.spark._options import EARLIEST, LATEST, parse_offsets, split_options

    own, config = split_options(
        {
            "path": "/x",
            "mappedfilesizecommitlog": "1048576",  # Spark lowercases option names
            "flush_disk_type": "SYNC_FLUSH",
            "messageindexenable": "false",
            "queueselector": "hash",
        },
        ["queueSelector"],
        what="writer",
    )
    assert own == {"queueselector": "hash"}
    assert config == {
        "mapped_file_size_commit_log": 1 << 20,
        "flush_disk_type": "SYNC_FLUSH",
        "message_index_enable": False,
    }
    with pytest.raises(InvalidConfigError, match="mappedFileSizeCommitLog") as info:
        split_options({"mappedfilesizecomitlog": "1"}, [], what="writer")
    assert info.value.key == "mappedfilesizecomitlog"
    with pytest.raises(InvalidConfigError, match="at least 4096"):
        split_options({"mappedFileSizeCommitLog": "10"}, [], what="writer")
    with pytest.raises(InvalidConfigError, match="integer"):
        split_options({"maxMessageSize": "big"}, [], what="writer")

    assert parse_offsets("s", None, EARLIEST) == (EARLIEST, {})
    assert parse_offsets("s", "latest", EARLIEST) == (LATEST, {})
    assert parse_offsets("s", '{"A": {"0": 5, "1": -2}}', EARLIEST) == (
        EARLIEST,
        {"*": {"A": {0: 5, 1: EARLIEST}}},
    )
    assert parse_offsets("s", '{"store-1": {"A": {"3": 7}}}', LATEST) == (
        LATEST,
        {"store-1": {"A": {3: 7}}},
    )
    for bad in ('{"A": 5}', '{"A": {"x": 1}}', '{"A": {"0": -3}}', "[1]", "soon"):
        with pytest.raises(InvalidConfigError):
            parse_offsets("startingOffsets", bad, EARLIEST)
