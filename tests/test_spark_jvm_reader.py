"""The JVM reader of ``format("rocketstore")`` (``jvm/``, ``crates/rocketstore-jni``).

With the jar loaded (``make build`` builds it; the ``spark`` fixture loads it), batch reads of
the messages table are a DataSource V2 scan with column pruning and columnar batches built in
Rust; ``spark.rocketstore.jvmReader=false`` turns it off for the session, which gives the
Python reader's rows to compare with in the same session.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

import rocketstore
from rocketstore.spark import _jvm
from rocketstore.spark._jvm import ENABLED_CONF, jvm_reader_conf, jvm_reader_files

pytestmark = pytest.mark.spark

#: Small files, so that one store has several commit log files (partitions).
SMALL = {
    "mappedFileSizeCommitLog": str(1 << 20),
    "mapped_file_size_consume_queue": str(20 * 300),
    "maxHashSlotNum": "512",
    "maxIndexNum": "2048",
}

INPUT_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("body", T.BinaryType(), False),
        T.StructField("tags", T.StringType(), True),
        T.StructField("keys", T.ArrayType(T.StringType()), True),
        T.StructField("properties", T.MapType(T.StringType(), T.StringType()), True),
        T.StructField("born_timestamp", T.TimestampType(), True),
    ]
)


def _rows(n: int, seed: int, body_size: int = 0) -> list[tuple[Any, ...]]:
    out = []
    for i in range(n):
        body = f"b{seed}-{i}-".encode() + bytes([i % 251]) * (body_size or i % 41)
        tags = None if i % 7 == 0 else f"Tag{i % 4}"
        keys = [f"order-{seed}-{i}", f"user-{i % 13}"] if i % 5 else None
        props = {"source": "jvm-test", "n": str(i)} if i % 3 == 0 else None
        born = datetime(2024, 1, 1, tzinfo=UTC).replace(microsecond=(i % 1000) * 1000)
        out.append((("TopicA", "TopicB")[i % 2], body, tags, keys, props, born))
    return out


def _write(spark: SparkSession, root: Path, rows: list[tuple[Any, ...]], parts: int) -> None:
    df = spark.createDataFrame(rows, INPUT_SCHEMA).repartition(parts)
    df.write.format("rocketstore").mode("append").options(**SMALL).save(str(root))


def _read(spark: SparkSession, root: Path, **options: str) -> DataFrame:
    return spark.read.format("rocketstore").options(**options).load(str(root))


def _plan(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


@contextmanager
def _python_reader(spark: SparkSession) -> Iterator[None]:
    spark.conf.set(ENABLED_CONF, "false")
    try:
        yield
    finally:
        spark.conf.set(ENABLED_CONF, "true")


@pytest.fixture(scope="module")
def jvm(spark: SparkSession) -> SparkSession:
    """The session, if it runs with the JVM reader (skips otherwise)."""
    if jvm_reader_files() is None:
        pytest.skip("the JVM reader was not built (make build needs javac)")
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    if "rocketstore-spark.jar" not in jars:
        pytest.skip("this Spark session was started without the JVM reader's jar")
    return spark


@pytest.fixture(scope="module")
def multi_root(jvm: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root with stores at two depths: two Spark-written stores (several 1 MiB commit log
    files each, manifest with their geometry) under ``a/`` and one under ``b/c/``."""
    root = tmp_path_factory.mktemp("jvm-multi")
    _write(jvm, root / "a", _rows(3000, 1, body_size=700), parts=2)
    _write(jvm, root / "b" / "c", _rows(500, 2), parts=1)
    return root


def test_jvm_rows_equal_python_rows(jvm: SparkSession, multi_root: Path) -> None:
    """Every column of every row (tags, keys, properties, timestamps, store) as the Python
    reader gives them; the plan shows which reader ran."""
    df = _read(jvm, multi_root)
    assert "rocketstore JVM reader" in _plan(df)
    jvm_rows = sorted(df.collect())
    with _python_reader(jvm):
        py_df = _read(jvm, multi_root)
        assert "(Python)" in _plan(py_df)
        assert py_df.schema == df.schema
        py_rows = sorted(py_df.collect())
    assert len(jvm_rows) == 3500
    assert jvm_rows == py_rows
    stores = {r.store for r in jvm_rows}
    assert len(stores) == 3
    assert all(s.startswith(str(multi_root)) for s in stores)
    assert any(r.properties and r.properties.get("source") == "jvm-test" for r in jvm_rows)
    assert len({(r.store, r.commitlog_offset) for r in jvm_rows}) == 3500


def test_pruned_columns_and_options(jvm: SparkSession, multi_root: Path) -> None:
    """Only the required columns are read; a pruning ``.schema()``, ``maxMessagesPerBatch``
    and ``verifyCrc`` give the same values as the Python reader."""
    df = _read(jvm, multi_root, maxMessagesPerBatch="97", verifyCrc="true")
    q = df.select("body", "tags", "store_timestamp").where("tags = 'Tag1'")
    plan = _plan(q)
    assert "rocketstore JVM reader [body, tags, store_timestamp]" in plan
    got = sorted(q.collect())
    with _python_reader(jvm):
        want = sorted(
            _read(jvm, multi_root)
            .select("body", "tags", "store_timestamp")
            .where("tags = 'Tag1'")
            .collect()
        )
    assert got == want
    assert got
    schema_df = jvm.read.format("rocketstore").schema("body binary").load(str(multi_root))
    assert "rocketstore JVM reader [body]" in _plan(schema_df)
    total = schema_df.selectExpr("sum(length(body))", "count(*)").collect()[0]
    with _python_reader(jvm):
        expect = _read(jvm, multi_root).selectExpr("sum(length(body))", "count(*)").collect()[0]
    assert tuple(total) == tuple(expect)
    assert _read(jvm, multi_root).count() == 3500  # no column at all


def test_reads_the_jvm_reader_does_not_serve_go_to_python(
    jvm: SparkSession, multi_root: Path
) -> None:
    """Options the JVM reader does not implement are the Python reader's, not ignored."""
    topic = _read(jvm, multi_root, topics="TopicB")
    assert "(Python)" in _plan(topic)
    assert {r.topic for r in topic.select("topic").collect()} == {"TopicB"}
    cq = _read(jvm, multi_root, table="consumequeue")
    assert "(Python)" in _plan(cq)
    assert cq.count() == 3500
    typed = jvm.read.format("rocketstore").schema("queue_id long").load(str(multi_root))
    assert "(Python)" in _plan(typed)
    with pytest.raises(Exception, match="unknown option"):
        _read(jvm, multi_root, verifyCrcc="true").collect()


def test_a_damaged_record_is_a_clear_error(jvm: SparkSession, tmp_path: Path) -> None:
    """A body CRC mismatch in an early commit log file (the open checks only the last files)
    fails the read with the engine's message in a Java exception, as the Python reader's
    CorruptionError; the JVM goes on serving queries."""
    root = tmp_path / "root"
    _write(jvm, root, _rows(6000, 3, body_size=1000), parts=1)
    store = next(p for p in root.iterdir() if p.name.startswith("store-"))
    first = sorted((store / "commitlog").iterdir())[0]
    with rocketstore.MessageStore(store, read_only=True, mapped_file_size_commit_log=1 << 20) as s:
        victim = next(m for i, m in enumerate(s.scan()) if i == 100)
    data = bytearray(first.read_bytes())
    at = data.index(victim.body, victim.commitlog_offset)
    data[at] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(Exception, match="RocketStoreException") as jvm_err:
        _read(jvm, root, verifyCrc="true").selectExpr("sum(length(body))").collect()
    text = str(jvm_err.value)
    with _python_reader(jvm), pytest.raises(Exception, match=first.name) as py_err:
        _read(jvm, root, verifyCrc="true").selectExpr("sum(length(body))").collect()
    # The same engine message (it names the file and the offset) from both readers.
    line = next(x for x in text.splitlines() if "RocketStoreException:" in x)
    message = line.split("RocketStoreException:", 1)[1].strip()
    assert first.name in message
    assert str(victim.commitlog_offset) in message
    assert message in str(py_err.value)
    assert _read(jvm, root).count() == 6000  # without verifyCrc: every record as stored


def test_a_missing_store_is_a_clear_error(jvm: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(Exception, match="no RocketMQ store"):
        _read(jvm, tmp_path / "empty").collect()
    with pytest.raises(Exception, match="no such directory"):
        _read(jvm, tmp_path / "nowhere").collect()


def test_without_the_built_files_nothing_is_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build without Java (no jar): nothing is added to Spark's settings or environment, so
    ``format("rocketstore")`` is the Python data source for everything."""
    monkeypatch.setattr(_jvm, "JVM_DIR", tmp_path)
    monkeypatch.delenv(_jvm.ENV_SWITCH, raising=False)
    assert jvm_reader_files() is None
    assert jvm_reader_conf("a.jar") == {}
    env: dict[str, str] = {}
    assert not _jvm.add_to_launch_environment(env)
    assert env == {}
    (tmp_path / "rocketstore-spark.jar").write_bytes(b"")
    conf = jvm_reader_conf("a.jar")
    assert conf == {"spark.jars": f"a.jar,{tmp_path / 'rocketstore-spark.jar'}"}


def test_the_jar_goes_on_the_launch_classpath_once_unless_switched_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before a session: the jar is appended to ``SPARK_DIST_CLASSPATH`` (kept entries first,
    never twice); ``ROCKETSTORE_SPARK_JVM=0`` adds nothing."""
    monkeypatch.setattr(_jvm, "JVM_DIR", tmp_path)
    monkeypatch.delenv(_jvm.ENV_SWITCH, raising=False)
    jar = tmp_path / "rocketstore-spark.jar"
    jar.write_bytes(b"")
    env = {"SPARK_DIST_CLASSPATH": "/opt/hadoop/*"}
    assert _jvm.add_to_launch_environment(env)
    assert _jvm.add_to_launch_environment(env)
    assert env["SPARK_DIST_CLASSPATH"] == f"/opt/hadoop/*:{jar}"
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv(_jvm.ENV_SWITCH, off)
        env = {}
        assert not _jvm.add_to_launch_environment(env)
        assert env == {}
        assert jvm_reader_conf() == {}


def test_the_running_session_has_the_connector(jvm: SparkSession) -> None:
    """The test session (started with the jar in ``spark.jars``): ``add_to_session`` finds the
    connector there and adds nothing."""
    assert _jvm.session_has_connector(jvm)
    assert _jvm.add_to_session(jvm)
