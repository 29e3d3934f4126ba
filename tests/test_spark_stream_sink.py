"""``df.writeStream.format("rocketstore")``: micro-batches appended to long-lived stores, exactly
once.

* A file-source stream goes into ``stores=2`` stores that grow batch by batch; a batch replayed
  after a restart (its commit removed from the checkpoint) is not stored twice; the batch
  reader, ``verify`` and the streaming source all see every row once.
* Readers stop at a store's last commit record: rows and task records of a batch not committed
  yet are invisible (no Spark session needed to check).
* Slow: the driver killed (``kill -9`` of its process group) in the middle of a task's append
  and again in the middle of the driver's commit, then a Python worker killed mid-append and a
  task failing after part of its rows (both retried by Spark): every source row is stored once,
  in two store directories, each verified, and readable by the streaming source while the query
  runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import rocketstore
import rocketstore.spark
from rocketstore.spark._sink_log import MARKER_TOPIC, last_commit, put_commit, put_task
from rocketstore.spark._stream_writer import (
    FAILPOINT_ENV,
    FAILPOINT_SIGNAL_ENV,
    SINK_METADATA,
    store_name,
)
from rocketstore.spark.verify import verify_local

SCHEMA = "topic string, body string, keys string"
CHILD = Path(__file__).with_name("_stream_sink_child.py")


def _rows(tag: str, n: int) -> list[dict[str, Any]]:
    return [{"topic": "Orders", "body": f"{tag}-{i}", "keys": f"k{i % 7}"} for i in range(n)]


def _write_file(src: Path, name: str, rows: list[dict[str, Any]], mtime: float) -> None:
    tmp = src / f".{name}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(tmp, (mtime, mtime))  # the file source takes the oldest files first
    tmp.rename(src / name)


def _start(spark: SparkSession, src: Path, root: Path, ckpt: Path) -> Any:
    return (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .writeStream.format("rocketstore")
        .option("checkpointLocation", str(ckpt))
        .option("stores", 2)
        .option("queueNums", 3)
        .trigger(availableNow=True)
        .start(str(root))
    )


def _stored(spark: SparkSession, root: Path) -> Counter[str]:
    df = spark.read.format("rocketstore").load(str(root)).select("topic", "body")
    rows = df.collect()
    assert all(r.topic == "Orders" for r in rows), "the sink's own topic is hidden"
    return Counter(bytes(r.body).decode() for r in rows)


def _streamed(spark: SparkSession, root: Path, out: Path) -> Counter[str]:
    """Every row the streaming source reads from ``root`` now (one availableNow run)."""
    q = (
        spark.readStream.format("rocketstore")
        .load(str(root))
        .select("body")
        .writeStream.format("parquet")
        .option("checkpointLocation", str(out / "_ckpt"))
        .trigger(availableNow=True)
        .start(str(out))
    )
    q.awaitTermination(180)
    assert q.exception() is None
    return Counter(bytes(r.body).decode() for r in spark.read.parquet(str(out)).collect())


def _store_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def _last_commits(root: Path) -> list[Any]:
    out = []
    for name in _store_dirs(root):
        with rocketstore.MessageStore(root / name, read_only=True) as s:
            out.append(last_commit(s))
    return out


@pytest.mark.spark
def test_stream_appends_to_fixed_stores_and_replays_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    rocketstore.spark.register(spark)
    src, root, ckpt = tmp_path / "src", tmp_path / "root", tmp_path / "ckpt"
    src.mkdir()
    files = [("a", 30), ("b", 20), ("c", 10)]
    t0 = time.time() - 100
    for i, (tag, n) in enumerate(files):
        _write_file(src, f"{tag}.json", _rows(tag, n), t0 + i)
    q = _start(spark, src, root, ckpt)
    q.awaitTermination(180)
    assert q.exception() is None
    assert _store_dirs(root) == [store_name(0), store_name(1)]
    assert json.loads((root / SINK_METADATA).read_text())["stores"] == 2
    # One file per micro-batch: one task each, rotating over the stores ((task + batch) % 2).
    commits = _last_commits(root)
    assert [c.batch for c in commits] == [2, 1]
    query = commits[0].query

    # The driver "died" after committing batch 2 to the stores but before recording it in the
    # checkpoint: Spark replays it; the stores' commit records make the replay store nothing.
    (ckpt / "commits" / "2").unlink()
    (ckpt / "commits" / ".2.crc").unlink(missing_ok=True)
    _write_file(src, "d.json", _rows("d", 15), t0 + 10)
    q = _start(spark, src, root, ckpt)
    q.awaitTermination(180)
    assert q.exception() is None

    want = Counter(r["body"] for tag, n in [*files, ("d", 15)] for r in _rows(tag, n))
    assert _stored(spark, root) == want
    assert _store_dirs(root) == [store_name(0), store_name(1)]
    commits = _last_commits(root)
    assert [c.queries[query] for c in commits] == [2, 3]
    assert [c.messages for c in commits] == [30 + 10, 20 + 15]
    report = verify_local(root)
    assert report.ok, report.format(examples=5)
    assert _streamed(spark, root, tmp_path / "out") == want


def test_readers_stop_at_the_last_commit_record(tmp_path: Path) -> None:
    from rocketstore.spark._reader import MESSAGE_SCHEMA, RocketStoreReader, list_queues
    from rocketstore.spark._stream import RocketStoreStreamReader

    root = tmp_path / "root"
    store = root / store_name(0)
    root.mkdir()
    (root / SINK_METADATA).write_text(json.dumps({"stores": 1, "config": {}}))
    with rocketstore.MessageStore(store) as s:
        for i in range(5):
            s.put("Orders", f"ok-{i}".encode(), queue_id=i % 2)
        put_task(s, query="q", run="r1", batch=0, partition=0, attempt=0, messages=5)
        put_commit(s, None, query="q", batch=0, messages=5)
        # Batch 1: rows and a task record, not committed yet; then rows of a dead attempt.
        for i in range(3):
            s.put("Orders", f"pending-{i}".encode(), queue_id=i % 2)
        s.put("Other", b"pending-new-topic")
        put_task(s, query="q", run="r1", batch=1, partition=0, attempt=0, messages=4)
        s.put("Orders", b"torn")
        s.flush()

    settings = RocketStoreReader({"path": str(root)}, MESSAGE_SCHEMA).settings
    queues = {(q.topic, q.queue_id): (q.min_offset, q.max_offset) for q in list_queues(settings)}
    assert queues == {("Orders", 0): (0, 3), ("Orders", 1): (0, 2), ("Other", 0): (0, 0)}
    reader = RocketStoreReader({"path": str(root)}, MESSAGE_SCHEMA)
    bodies = sorted(
        bytes(b or b"").decode()
        for p in reader.partitions()
        for batch in reader.read(p)
        for b in batch.column("body").to_pylist()
    )
    assert bodies == [f"ok-{i}" for i in range(5)]
    stream = RocketStoreStreamReader({"path": str(root)}, MESSAGE_SCHEMA)
    assert stream.initialOffset() == {
        store_name(0): {"Orders": {"0": 0, "1": 0}, "Other": {"0": 0}}
    }
    assert stream._latest() == {store_name(0): {"Orders": {"0": 3, "1": 2}, "Other": {"0": 0}}}
    # The marker topic is a plain RocketMQ topic on disk: a broker loads it like any other.
    with rocketstore.MessageStore(store, read_only=True) as s:
        assert (MARKER_TOPIC, 0) in {(t, q) for t, q, _, _ in s.consume_queues()}


def test_sink_options_and_roots_are_checked_before_any_task(tmp_path: Path) -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    from rocketstore.exceptions import InvalidConfigError
    from rocketstore.spark._stream_writer import RocketStoreStreamWriter

    schema = StructType([StructField("topic", StringType()), StructField("body", StringType())])
    root = tmp_path / "root"
    RocketStoreStreamWriter({"path": str(root), "stores": "2"}, schema)
    assert json.loads((root / SINK_METADATA).read_text())["stores"] == 2
    with pytest.raises(InvalidConfigError, match="holds 2 stores") as e:
        RocketStoreStreamWriter({"path": str(root), "stores": "3"}, schema)
    assert e.value.key == "stores"
    for bad in ("0", "x", "10001"):
        with pytest.raises(InvalidConfigError):
            RocketStoreStreamWriter({"path": str(tmp_path / "r2"), "stores": bad}, schema)
    with pytest.raises(InvalidConfigError, match="streamId"):
        RocketStoreStreamWriter({"path": str(tmp_path / "r3"), "streamId": "a"}, schema)
    # A root with stores the sink did not write is refused (their data would be cut back).
    foreign = tmp_path / "foreign"
    with rocketstore.MessageStore(foreign / "store-00000") as s:
        s.put("Orders", b"mine")
    with pytest.raises(InvalidConfigError, match="did not write") as e:
        RocketStoreStreamWriter({"path": str(foreign)}, schema)
    assert e.value.key == "path"


def _child(
    dirs: tuple[Path, Path, Path], log: Path, failpoint: str, sig: Path | None
) -> subprocess.Popen[bytes]:
    """Starts the query (``dirs``: source, root, checkpoint) in a child process group."""
    src, root, ckpt = dirs
    env = dict(os.environ, **{FAILPOINT_ENV: failpoint})
    if sig is not None:
        env[FAILPOINT_SIGNAL_ENV] = str(sig)
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(CHILD), str(src), str(root), str(ckpt)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: driver, JVM and Python workers
        )


def _wait_for(sig: Path, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 300
    while not sig.exists():
        if proc.poll() is not None:
            pytest.fail(f"the query ended ({proc.returncode}) before pausing:\n{log.read_text()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"the query never paused:\n{log.read_text()[-5000:]}")
        time.sleep(0.2)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(1200)  # three child drivers, each starting its own JVM
def test_killed_driver_and_failed_tasks_store_every_row_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    rocketstore.spark.register(spark)
    src, root, ckpt, log = tmp_path / "src", tmp_path / "root", tmp_path / "ckpt", tmp_path / "log"
    src.mkdir()
    t0 = time.time() - 100
    names = [f"f{i}" for i in range(8)]  # two files per micro-batch: batches 0-3
    for i, name in enumerate(names):
        _write_file(src, f"{name}.json", _rows(name, 25), t0 + i)
    want = Counter(r["body"] for name in names for r in _rows(name, 25))
    batch0 = Counter(r["body"] for name in names[:2] for r in _rows(name, 25))

    # Run 1: killed while the first task of batch 1 has appended 10 of its rows.
    sig = tmp_path / "paused-1"
    proc = _child((src, root, ckpt), log, "task:1:0:10:pause", sig)
    _wait_for(sig, proc, log)
    # While the query runs (paused mid-append): readers see batch 0, nothing of batch 1.
    assert _stored(spark, root) == batch0
    assert _streamed(spark, root, tmp_path / "out-1") == batch0
    _kill(proc)

    # Run 2: batch 1 replayed; killed in the driver's commit, one store committed, one not.
    sig = tmp_path / "paused-2"
    proc = _child((src, root, ckpt), log, "commit:1:1:0:pause", sig)
    _wait_for(sig, proc, log)
    seen = _stored(spark, root)
    assert max(seen.values()) == 1
    assert set(seen) <= set(want)
    assert batch0 <= seen
    _kill(proc)

    # Run 3: batch 1 replayed again; a Python worker dies mid-append in batch 2 and a task
    # fails after 7 rows in batch 3, each retried by Spark; the query then ends cleanly.
    proc = _child((src, root, ckpt), log, "task:2:1:5:exit;task:3:0:7:raise", None)
    try:
        code = proc.wait(900)
    finally:
        if proc.poll() is None:
            _kill(proc)
    assert code == 0, log.read_text()[-5000:]
    text = log.read_text()
    assert "injected failure" in text, "the task of batch 3 failed once"
    assert text.count("Lost task") >= 2, "both injected failures were retried"

    assert _store_dirs(root) == [store_name(0), store_name(1)]
    assert _stored(spark, root) == want
    report = verify_local(root)
    assert report.ok, report.format(examples=5)
    assert _streamed(spark, root, tmp_path / "out-end") == want
    source = spark.read.schema(SCHEMA).json(str(src))
    checked = rocketstore.spark.verify(spark, str(root), expected=source)
    assert checked.ok, checked.format(examples=5)
    commits = _last_commits(root)
    assert all(c is not None and c.batch == 3 for c in commits)
    assert sum(c.messages for c in commits) == sum(want.values())


def _blocks(path: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


@pytest.mark.spark
def test_batch_write_of_20_rows_into_2_stores_takes_little_disk(
    spark: SparkSession, tmp_path: Path
) -> None:
    rocketstore.spark.register(spark)
    root = tmp_path / "root"
    rows = [("Orders", f"body-{i}".encode(), f"k{i}") for i in range(20)]
    df = spark.createDataFrame(rows, "topic string, body binary, keys string").repartition(2)
    df.write.format("rocketstore").mode("append").save(str(root))
    stores = [p for p in root.iterdir() if (p / "commitlog").is_dir()]
    assert len(stores) == 2
    for store in stores:
        # The floor: 1.5x the bytes written plus 4 MiB (a few KiB of records here).
        assert _blocks(store) <= 4 * 1024 * 1024 + 64 * 1024, (store, _blocks(store))


@pytest.mark.spark
def test_stream_of_80_rows_in_2_batches_takes_little_disk(
    spark: SparkSession, tmp_path: Path
) -> None:
    rocketstore.spark.register(spark)
    src, root, ckpt = tmp_path / "src", tmp_path / "root", tmp_path / "ckpt"
    src.mkdir()
    t0 = time.time() - 100
    for i in range(2):
        _write_file(src, f"f{i}.json", _rows(f"f{i}", 40), t0 + i)
    q = _start(spark, src, root, ckpt)
    q.awaitTermination(180)
    assert q.exception() is None
    assert _store_dirs(root) == [store_name(0), store_name(1)]
    for name in _store_dirs(root):
        # The floor: 1.5x the bytes written plus 4 MiB (a few KiB of records here).
        assert _blocks(root / name) <= 4 * 1024 * 1024 + 64 * 1024, (name, _blocks(root / name))
