"""The JVM batch writer of ``df.write.format("rocketstore")`` (``jvm/``, rocketstore-jni).

With the jar loaded, the tasks of a batch write run in the JVM (rows -> Arrow -> the same Rust
task writer the Python tasks use) while the driver side (checks, job directory, commit,
manifest) stays the Python writer's; ``spark.rocketstore.jvmWriter=false`` gives the Python
tasks, to compare with in the same session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from rocketstore.spark._jvm import WRITER_CONF, jvm_reader_files
from rocketstore.spark._writer import JVM_JOB_OPTION, StoreCommitMessage, _from_jvm

pytestmark = pytest.mark.spark

SMALL = {"mappedFileSizeCommitLog": str(1 << 20)}

INPUT_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("body", T.BinaryType(), True),
        T.StructField("tags", T.StringType(), True),
        T.StructField("keys", T.ArrayType(T.StringType()), True),
        T.StructField("properties", T.MapType(T.StringType(), T.StringType()), True),
        T.StructField("born_timestamp", T.TimestampType(), True),
    ]
)


def _rows(n: int, seed: int, bad_at: int | None = None) -> list[tuple[Any, ...]]:
    out = []
    for i in range(n):
        body: bytes | None = f"b{seed}-{i}-".encode() + bytes([i % 251]) * (i % 300)
        if i == bad_at:
            body = None
        tags = None if i % 7 == 0 else f"Tag{i % 4}"
        keys = [f"order-{seed}-{i}", f"user-{i % 13}"] if i % 5 else None
        props = {"source": "jvm-writer", "n": str(i)} if i % 3 == 0 else None
        born = datetime(2024, 1, 1, tzinfo=UTC).replace(microsecond=(i % 1000) * 1000)
        out.append((("TopicA", "TopicB")[i % 2], body, tags, keys, props, born))
    return out


def _df(spark: SparkSession, rows: list[tuple[Any, ...]], parts: int) -> DataFrame:
    # Sorted into a fixed partitioning, so both writers see the same rows per partition.
    return spark.createDataFrame(rows, INPUT_SCHEMA).coalesce(1).repartition(parts).cache()


@contextmanager
def _python_writer(spark: SparkSession) -> Iterator[None]:
    spark.conf.set(WRITER_CONF, "false")
    try:
        yield
    finally:
        spark.conf.set(WRITER_CONF, "true")


def _manifest(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "_SUCCESS").read_text())
    return data


def _comparable(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("job_id", "task_attempt", "path")}


@pytest.fixture(scope="module")
def jvm(spark: SparkSession) -> Iterator[SparkSession]:
    """The session with the JVM writer on, if it runs with the JVM jar (skips otherwise)."""
    if jvm_reader_files() is None:
        pytest.skip("the JVM writer was not built (make build needs javac)")
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    if "rocketstore-spark.jar" not in jars:
        pytest.skip("this Spark session was started without the rocketstore jar")
    spark.conf.set(WRITER_CONF, "true")  # the default, set in case the session changed it
    try:
        yield spark
    finally:
        spark.conf.unset(WRITER_CONF)


def _jvm_tasks(spark: SparkSession) -> int:
    """Write task attempts the JVM writer started (the session runs in local mode)."""
    jvm = spark._jvm
    assert jvm is not None
    return int(jvm.rocketstore.spark.RocketStoreProvider.jvmWriterTasks())


def _write(df: DataFrame, root: Path, mode: str = "append", **extra: str) -> None:
    df.write.format("rocketstore").mode(mode).options(**SMALL, **extra).save(str(root))


#: Properties the store generates per message (unique key; CRC over the properties with it).
GENERATED = ("UNIQ_KEY", "__CRC32#")


def _read_back(spark: SparkSession, root: Path) -> list[tuple[Any, ...]]:
    """Every record's columns but the generated ones (:data:`GENERATED`, store time, ids)."""
    df = spark.read.format("rocketstore").load(str(root))
    cols = ["topic", "queue_id", "queue_offset", "body", "tags", "keys", "properties"]
    return sorted(
        (
            *r[:-1],
            sorted((k, v) for k, v in (r.properties or {}).items() if k not in GENERATED),
        )
        for r in df.select(*cols, "born_timestamp").select(*cols).collect()
    )


def test_jvm_writer_writes_what_the_python_writer_writes(jvm: SparkSession, tmp_path: Path) -> None:
    """The same DataFrame through both writers: equal manifests (per store: messages, bytes,
    offsets, queues, body digest, config) and equal records read back."""
    # Over 4,096 rows per task: several Arrow batches per task (keys and properties of later
    # batches once went missing).
    df = _df(jvm, _rows(20_000, 1), parts=3)
    before = _jvm_tasks(jvm)
    _write(df, tmp_path / "jvm", queueSelector="round_robin")
    assert _jvm_tasks(jvm) == before + 3
    with _python_writer(jvm):
        _write(df, tmp_path / "py", queueSelector="round_robin")
    assert _jvm_tasks(jvm) == before + 3
    m_jvm, m_py = _manifest(tmp_path / "jvm"), _manifest(tmp_path / "py")
    assert m_jvm["totals"] == m_py["totals"]
    assert m_jvm["totals"]["messages"] == 20_000
    assert [_comparable(e) for e in m_jvm["stores"]] == [_comparable(e) for e in m_py["stores"]]
    assert _read_back(jvm, tmp_path / "jvm") == _read_back(jvm, tmp_path / "py")
    assert not (tmp_path / "jvm" / "_temporary").exists()
    # The default selector (hash of the keys) too.
    _write(df, tmp_path / "jvm-hash")
    with _python_writer(jvm):
        _write(df, tmp_path / "py-hash")
    m_jvm, m_py = _manifest(tmp_path / "jvm-hash"), _manifest(tmp_path / "py-hash")
    assert [_comparable(e) for e in m_jvm["stores"]] == [_comparable(e) for e in m_py["stores"]]


FLAT_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("body", T.BinaryType(), True),
        T.StructField("queue_id", T.IntegerType(), True),
        T.StructField("tags", T.StringType(), True),
        T.StructField("keys", T.StringType(), True),
        T.StructField("flag", T.IntegerType(), True),
        T.StructField("born_timestamp", T.TimestampType(), True),
        T.StructField("delay_level", T.LongType(), True),
    ]
)


def _flat_rows(n: int, seed: int, bad_at: int | None = None) -> list[tuple[Any, ...]]:
    out = []
    for i, (topic, body, tags, keys, _props, born) in enumerate(_rows(n, seed, bad_at)):
        queue = None if i % 6 == 0 else i % 8
        joined = None if keys is None else " ".join(keys)
        flag = None if i % 9 == 0 else i % 5
        out.append((topic, body, queue, tags, joined, flag, born, i % 3 if i % 4 else None))
    return out


def _jvm_column_tasks(spark: SparkSession) -> int:
    jvm = spark._jvm
    assert jvm is not None
    return int(jvm.rocketstore.spark.RocketStoreProvider.jvmWriterColumnTasks())


def test_flat_columns_are_handed_over_as_arrays_and_write_what_the_python_writer_writes(
    jvm: SparkSession, tmp_path: Path
) -> None:
    """Strings, binaries, ints, longs and timestamps only: the tasks hand their rows over as
    plain column arrays (no Arrow IPC) and the stores are the Python writer's, nulls
    included, over several batches per task."""
    df = jvm.createDataFrame(_flat_rows(12_000, 8), FLAT_SCHEMA)
    df = df.coalesce(1).repartition(2).cache()
    before, columns_before = _jvm_tasks(jvm), _jvm_column_tasks(jvm)
    _write(df, tmp_path / "jvm", queueSelector="round_robin")
    assert (_jvm_tasks(jvm), _jvm_column_tasks(jvm)) == (before + 2, columns_before + 2)
    with _python_writer(jvm):
        _write(df, tmp_path / "py", queueSelector="round_robin")
    m_jvm, m_py = _manifest(tmp_path / "jvm"), _manifest(tmp_path / "py")
    assert m_jvm["totals"] == m_py["totals"]
    assert m_jvm["totals"]["messages"] == 12_000
    assert [_comparable(e) for e in m_jvm["stores"]] == [_comparable(e) for e in m_py["stores"]]
    assert _read_back(jvm, tmp_path / "jvm") == _read_back(jvm, tmp_path / "py")
    got = jvm.read.format("rocketstore").load(str(tmp_path / "jvm"))
    assert got.where("flag = 4").count() == df.where("flag = 4").count() > 0
    assert not (tmp_path / "jvm" / "_temporary").exists()
    bad = jvm.createDataFrame(_flat_rows(400, 5, bad_at=250), FLAT_SCHEMA).repartition(1)
    with pytest.raises(Exception, match=r"invalid body: message \d+: is null"):
        _write(bad, tmp_path / "bad")
    assert not (tmp_path / "bad" / "_SUCCESS").exists()


def test_jvm_writer_append_and_overwrite(jvm: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(_df(jvm, _rows(300, 2), parts=2), root)
    _write(_df(jvm, _rows(200, 3), parts=1), root)
    m = _manifest(root)
    assert m["totals"] == {"stores": 3, "messages": 500, "bytes": m["totals"]["bytes"]}
    assert sorted(p.name for p in root.glob("store-*")) == [
        "store-00000",
        "store-00001",
        "store-00002",
    ]
    _write(_df(jvm, _rows(100, 4), parts=1), root, mode="overwrite")
    m = _manifest(root)
    assert m["mode"] == "overwrite"
    assert m["totals"]["messages"] == 100
    assert len(m["stores"]) == 1
    assert jvm.read.format("rocketstore").load(str(root)).count() == 100
    assert not (root / "_temporary").exists()


def test_a_bad_row_fails_the_job_and_publishes_nothing(jvm: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "root"
    with pytest.raises(Exception, match=r"invalid body: message \d+: is null") as info:
        _write(_df(jvm, _rows(400, 5, bad_at=250), parts=2), root)
    assert "rocketstore writer: Spark partition" in str(info.value)
    assert not (root / "_SUCCESS").exists()
    assert not list(root.glob("store-*"))
    assert not list((root / "_temporary").glob("*/part-*")) if root.exists() else True


def test_options_are_still_checked_on_the_driver(jvm: SparkSession, tmp_path: Path) -> None:
    df = _df(jvm, _rows(10, 6), parts=1)
    with pytest.raises(Exception, match=r"(?i)unknown option 'mappedFileSizeCommitLogg'"):
        df.write.format("rocketstore").mode("append").option("mappedFileSizeCommitLogg", "1").save(
            str(tmp_path / "r")
        )
    with pytest.raises(Exception, match="columns"):
        df.withColumnRenamed("tags", "tagz").write.format("rocketstore").mode("append").save(
            str(tmp_path / "r2")
        )
    with pytest.raises(Exception, match="internal to the JVM writer"):
        df.write.format("rocketstore").mode("append").option(JVM_JOB_OPTION, "mine").save(
            str(tmp_path / "r3")
        )


def test_the_conf_turns_the_jvm_writer_off(jvm: SparkSession, tmp_path: Path) -> None:
    """With ``spark.rocketstore.jvmWriter=false`` the Python tasks write."""
    df = _df(jvm, _rows(50, 7), parts=1)
    before = _jvm_tasks(jvm)
    with _python_writer(jvm):
        _write(df, tmp_path / "py")
    assert _jvm_tasks(jvm) == before
    assert _manifest(tmp_path / "py")["totals"]["messages"] == 50
    _write(df, tmp_path / "jvm")
    assert _jvm_tasks(jvm) == before + 1


def test_from_jvm_builds_a_store_commit_message() -> None:
    m = _from_jvm(
        '{"partition": 2, "task_attempt": 9, "attempt_number": 1, "path": "/x/p", '
        '"stats": {"messages": 3, "queues": {"T": {"0": 3}}, "body_digest": "12"}}'
    )
    assert m == StoreCommitMessage(
        2, 9, 1, "/x/p", {"messages": 3, "queues": {"T": {"0": 3}}, "body_digest": "12"}
    )
    assert (
        _from_jvm(
            '{"partition": 0, "task_attempt": 1, "attempt_number": 0, "path": null, "stats": {}}'
        ).path
        is None
    )


def test_both_writers_compress_bodies_alike(jvm: SparkSession, tmp_path: Path) -> None:
    """``compressionType``: the JVM and the Python writer store the same compressed records
    (equal manifests), the manifest's body digest is over the bodies as given (equal to an
    uncompressed write's), the records carry the codec's SYSFLAG bits, and the verify job
    checks the stores against the source."""
    from rocketstore.spark import verify

    df = _df(jvm, _rows(3_000, 2), parts=2)
    opts = {"queueSelector": "round_robin", "compressionType": "zstd", "compressOver": "64"}
    _write(df, tmp_path / "jvm", **opts)
    with _python_writer(jvm):
        _write(df, tmp_path / "py", **opts)
    _write(df, tmp_path / "plain", queueSelector="round_robin")
    m_jvm, m_py, m_plain = (_manifest(tmp_path / n) for n in ("jvm", "py", "plain"))
    assert [_comparable(e) for e in m_jvm["stores"]] == [_comparable(e) for e in m_py["stores"]]
    digests = [[e["body_digest"] for e in m["stores"]] for m in (m_jvm, m_plain)]
    assert digests[0] == digests[1]
    assert m_jvm["totals"]["bytes"] < m_plain["totals"]["bytes"]
    rows = jvm.read.format("rocketstore").load(str(tmp_path / "jvm")).collect()
    compressed = [r for r in rows if r.sys_flag & 1]
    assert len(compressed) > len(rows) // 2  # bodies from 64 bytes that shrink
    assert {r.sys_flag & 0x701 for r in compressed} == {0x201}
    from rocketstore.spark import decompressed

    read = jvm.read.format("rocketstore").load(str(tmp_path / "jvm"))
    assert sorted(
        r.body for r in decompressed(read).select("body", "sys_flag").collect()
    ) == sorted(r.body for r in df.select("body").collect())
    report = verify(jvm, tmp_path / "jvm", expected=df)
    assert report.ok, str(report)
    with pytest.raises(Exception, match="compressLevel"):
        _write(df, tmp_path / "bad", compressionType="zlib", compressLevel="10")
