"""The Spark jobs: ``ingest`` into N stores and ``verify`` (with planted faults).

One small root is ingested once per module (``pristine``); each fault test copies it, damages
the copy in one place and checks that exactly the matching check fails and says where.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import rocketstore
from rocketstore.spark._report import CHECKS, Check, VerifyReport

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

pytestmark = pytest.mark.spark

# Small files (several commit log and consume queue files per store, a small index): the
# index geometry is not recorded in the files, so verify() is given it too.
INDEX: dict[str, Any] = {"max_hash_slot_num": 1024, "max_index_num": 4096}
SMALL: dict[str, Any] = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 300 * 20,
    **INDEX,
}
BIG_INDEX: dict[str, Any] = {"max_hash_slot_num": 100_000, "max_index_num": 400_000}
BIG: dict[str, Any] = {
    "mapped_file_size_commit_log": 64 * 1024 * 1024,
    "mapped_file_size_consume_queue": 50_000 * 20,
    **BIG_INDEX,
}
N_SMALL = 3000


def _demo(spark: SparkSession, n: int) -> DataFrame:
    from rocketstore.spark.jobs import demo_messages

    return demo_messages(spark, n, partitions=2)


@pytest.fixture(scope="module")
def pristine(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root with 2 stores of N_SMALL demo messages, verified green once."""
    from rocketstore.spark import ingest

    root = tmp_path_factory.mktemp("pristine") / "root"
    summary = ingest(_demo(spark, N_SMALL), root, stores=2, mode="overwrite", **SMALL)
    assert summary["messages"] == N_SMALL
    return root


@pytest.fixture
def damaged(pristine: Path, tmp_path: Path) -> Path:
    """A private copy of the pristine root, to plant a fault in."""
    root = tmp_path / "root"
    shutil.copytree(pristine, root)
    return root


# --------------------------------------------------------------------------------------
# Helpers that need no Spark
# --------------------------------------------------------------------------------------


def test_verify_store_runs_without_spark(tmp_path: Path) -> None:
    from rocketstore.cli import demo_table
    from rocketstore.spark.jobs import verify_store

    path = tmp_path / "store"
    with rocketstore.MessageStore(path, **SMALL) as store:
        store.put_batch(demo_table(2000, 200))
    checks, stats = verify_store(path, name="one", config=INDEX)
    assert {name: c.passed for name, c in checks.items()} == dict.fromkeys(checks, True)
    assert checks["crc"].checked == 2000
    assert checks["manifest"].skipped == 1  # no manifest outside a Spark write
    assert stats["messages"] == 2000
    assert stats["files"] > 3
    assert sum(q[2] for q in stats["queues"]) == 2000


def test_report_round_trips_through_json(tmp_path: Path) -> None:
    checks = {name: Check(name, checked=10) for name in CHECKS}
    checks["crc"].fail("store-00000: body CRC mismatch at commit log offset 42")
    report = VerifyReport(
        root="/x",
        checks=checks,
        stores=[{"name": "store-00000", "messages": 10}],
        queues=[{"store": "store-00000", "topic": "T", "queue_id": 0, "messages": 10}],
        messages=10,
        seconds=2.0,
    )
    assert not report.ok
    assert report.failed_checks == ["crc"]
    again = VerifyReport.from_dict(json.loads(report.to_json()))
    assert again.to_dict() == report.to_dict()
    text = report.format()
    assert "VERIFICATION FAILED" in text
    assert "commit log offset 42" in text
    written = report.write(tmp_path / "r.json")
    assert [p.name for p in written] == ["r.json", "r.png"]
    assert json.loads((tmp_path / "r.json").read_text())["checks"]["crc"]["failed"] == 1


# --------------------------------------------------------------------------------------
# ingest
# --------------------------------------------------------------------------------------


def test_partition_keys_match_spark_hash_partitioning(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    from rocketstore.spark._ingest import _murmur3_int, _partition_keys

    rows = spark.range(-5, 200).select("id", F.hash(F.col("id").cast("int")).alias("h")).collect()
    assert all(r["h"] == _murmur3_int(r["id"]) for r in rows)
    for n in (1, 2, 3, 4, 7, 16):
        keys = _partition_keys(n)
        assert [_murmur3_int(k) % n for k in keys] == list(range(n))


def test_ingest_writes_one_store_per_partition_and_whole_queues(
    spark: SparkSession, pristine: Path
) -> None:
    from pyspark.sql import functions as F

    stores = sorted(p.name for p in pristine.iterdir() if p.name.startswith("store-"))
    assert stores == ["store-00000", "store-00001"]
    manifest = json.loads((pristine / "_SUCCESS").read_text())
    assert manifest["totals"]["messages"] == N_SMALL
    back = spark.read.format("rocketstore").load(str(pristine))
    per_queue = back.groupBy("topic", "queue_id").agg(F.countDistinct("store").alias("n"))
    assert per_queue.where("n != 1").count() == 0  # every queue lives in exactly one store
    assert back.count() == N_SMALL


def test_ingest_without_queue_id_routes_by_keys(spark: SparkSession, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from rocketstore.spark import ingest

    df = spark.range(0, 400, 1, 2).select(
        F.lit("T").alias("topic"),
        F.concat(F.lit("k"), (F.col("id") % 40).cast("string")).alias("keys"),
        F.col("id").cast("string").cast("binary").alias("body"),
    )
    summary = ingest(df, tmp_path / "root", stores=3, queueNums=4, **SMALL)
    assert summary["messages"] == 400
    assert len(summary["stores"]) == 3
    assert summary["messages_per_second"] > 0
    back = spark.read.format("rocketstore").load(str(tmp_path / "root"))
    per_key = back.groupBy("keys").agg(
        F.countDistinct("store").alias("stores"), F.countDistinct("queue_id").alias("queues")
    )
    assert per_key.where("stores != 1 or queues != 1").count() == 0  # a key keeps its order


def test_ingest_rejects_bad_arguments(spark: SparkSession, tmp_path: Path) -> None:
    from rocketstore.spark import ingest

    df = spark.createDataFrame([("T", b"x")], "topic string, body binary")
    with pytest.raises(ValueError, match="stores"):
        ingest(df, tmp_path / "r", stores=0)
    with pytest.raises(ValueError, match="mode"):
        ingest(df, tmp_path / "r", mode="ignore")


# --------------------------------------------------------------------------------------
# verify: green, then one planted fault each
# --------------------------------------------------------------------------------------


def _only_failures(report: Any) -> set[str]:
    return {name for name, c in report.checks.items() if not c.passed}


def test_clean_ingest_verifies_green(spark: SparkSession, pristine: Path, tmp_path: Path) -> None:
    from rocketstore.spark import verify

    report = verify(
        spark,
        pristine,
        expected=_demo(spark, N_SMALL),
        report_path=tmp_path / "verify.json",
        **INDEX,
    )
    assert report.ok, report.format()
    assert report.messages == N_SMALL
    assert report.source_rows == N_SMALL
    for name in CHECKS:
        assert report.checks[name].ran, name
        assert report.checks[name].checked > 0, name
    assert report.checks["crc"].checked == N_SMALL
    assert report.checks["index"].checked >= N_SMALL  # every key, plus the unique keys
    assert [s["name"] for s in report.stores] == ["store-00000", "store-00001"]
    assert sum(q["messages"] for q in report.queues) == N_SMALL
    data = json.loads((tmp_path / "verify.json").read_text())
    assert data["ok"] is True
    assert (tmp_path / "verify.png").stat().st_size > 1000
    rows = {r["name"]: r for r in report.df.collect()}
    assert set(rows) == set(CHECKS)
    assert all(r["passed"] for r in rows.values())
    assert "ALL CHECKS PASSED" in str(report)


def test_verify_one_store_and_a_store_without_manifest(
    spark: SparkSession, pristine: Path, tmp_path: Path
) -> None:
    from rocketstore.cli import demo_table
    from rocketstore.spark import verify

    one = verify(spark, pristine / "store-00001", **INDEX)
    assert one.ok, one.format()
    assert [s["name"] for s in one.stores] == ["."]
    assert one.checks["manifest"].checked == 6  # its own entry in the parent's manifest

    plain = tmp_path / "plain"
    with rocketstore.MessageStore(plain, **SMALL) as store:
        store.put_batch(demo_table(500, 64))
    report = verify(spark, plain, **INDEX)
    assert report.ok, report.format()
    assert report.messages == 500
    assert report.checks["manifest"].checked == 0
    assert "no _SUCCESS manifest" in " ".join(report.checks["manifest"].notes)


def _record_in_first_file(store: Path, index: int) -> tuple[Path, int, rocketstore.Message]:
    """(first commit log file, commit log offset, message) of the ``index``-th record."""
    with rocketstore.MessageStore(store, read_only=True) as s:
        batch, _ = s.read_arrow(0, max_messages=index + 1)
        offset = int(batch.column("commitlog_offset")[index].as_py())
        msg = s.look_message_by_offset(offset)
    first = sorted((store / "commitlog").iterdir())[0]
    return first, offset, msg


def test_flipped_body_byte_fails_crc(spark: SparkSession, damaged: Path) -> None:
    from rocketstore.spark import verify

    store = damaged / "store-00001"
    path, offset, msg = _record_in_first_file(store, 5)
    data = bytearray(path.read_bytes())
    record = bytes(data[offset : offset + msg.store_size])
    at = offset + record.index(msg.body) + len(msg.body) // 2
    data[at] ^= 0x20
    path.write_bytes(bytes(data))

    report = verify(spark, damaged, **INDEX)
    crc = report.checks["crc"]
    assert crc.failed == 1, report.format()
    assert len(crc.examples) == 1
    assert "store-00001" in crc.examples[0]
    assert f"commit log offset {offset:,}" in crc.examples[0]
    assert f"commitlog/{path.name}" in crc.examples[0]
    # The record is still framed and indexed: only its body (and so the digest) differ.
    assert _only_failures(report) == {"crc", "manifest"}
    assert any("body_digest" in e for e in report.checks["manifest"].examples)
    assert not report.ok


def test_missing_cq_unit_fails_consume_queue(spark: SparkSession, damaged: Path) -> None:
    from rocketstore.spark import verify

    store = damaged / "store-00000"
    with rocketstore.MessageStore(store, read_only=True) as s:
        topic, qid, _, qmax = max(s.consume_queues(), key=lambda q: q[3])
    files = sorted((store / "consumequeue" / topic / str(qid)).iterdir())
    data = bytearray(files[-1].read_bytes())
    last = max(i for i in range(0, len(data), 20) if any(data[i : i + 20]))
    data[last : last + 20] = bytes(20)  # the queue's last unit is gone
    files[-1].write_bytes(bytes(data))

    report = verify(spark, damaged, **INDEX)
    cq = report.checks["consume_queue"]
    assert cq.failed == 1, report.format()
    assert cq.examples[0].startswith(f"store-00000: {topic} queue {qid} offset {qmax - 1}:")
    assert "has no consume queue unit" in cq.examples[0]
    assert _only_failures(report) == {"consume_queue"}


def _some_key(df: DataFrame) -> str:
    """A key that exactly one row of the demo DataFrame has."""
    row = df.where("keys like 'ORD-%'").orderBy("keys").first()
    assert row is not None
    return str(row["keys"])


def test_dropped_message_fails_source(spark: SparkSession, pristine: Path) -> None:
    from pyspark.sql import functions as F

    from rocketstore.spark import verify

    source = _demo(spark, N_SMALL)
    key = _some_key(source)
    lost = source.where(F.col("keys") == key).withColumn("body", F.lit(b"never stored"))
    expected = source.unionByName(lost)  # one row more than the stores hold

    report = verify(spark, pristine, expected=expected, **INDEX)
    src = report.checks["source"]
    assert src.failed == 1, report.format()
    assert report.source_rows == N_SMALL + 1
    assert len(src.examples) == 1
    assert f"keys={key!r}" in src.examples[0]
    assert "missing from the stores" in src.examples[0]
    assert _only_failures(report) == {"source"}


def test_extra_stored_message_fails_source_and_names_the_store(
    spark: SparkSession, pristine: Path
) -> None:
    from pyspark.sql import functions as F

    from rocketstore.spark import verify

    source = _demo(spark, N_SMALL)
    key = _some_key(source)
    expected = source.where(~F.col("keys").eqNullSafe(key))  # one row fewer
    report = verify(spark, pristine, expected=expected, sample_keys=50, **INDEX)
    src = report.checks["source"]
    assert src.failed == 1
    assert f"keys={key!r}" in src.examples[0]
    assert "stored but not in the source" in src.examples[0]
    assert "(in store-0000" in src.examples[0]
    assert "a sample of up to 50" in " ".join(report.checks["index"].notes)


def test_changed_body_fails_source_and_names_the_row(spark: SparkSession, pristine: Path) -> None:
    """Same count per queue, one body differs: the digest sums differ, the join names it."""
    from pyspark.sql import functions as F

    from rocketstore.spark import verify

    source = _demo(spark, N_SMALL)
    key = _some_key(source)
    changed = F.when(F.col("keys") == key, F.lit(b"changed")).otherwise(F.col("body"))
    expected = source.withColumn("body", changed)
    report = verify(spark, pristine, expected=expected, sample_keys=10, **INDEX)
    src = report.checks["source"]
    assert src.failed == 2, report.format()  # the stored row is extra, the source row missing
    assert all(f"keys={key!r}" in e for e in src.examples)
    assert _only_failures(report) == {"source"}


def test_source_without_queue_id_and_with_key_arrays_verifies_green(
    spark: SparkSession, pristine: Path
) -> None:
    """The digests without queue ids; keys given as arrays are joined like the writer does."""
    from pyspark.sql import functions as F

    from rocketstore.spark import verify

    source = _demo(spark, N_SMALL).drop("queue_id")
    expected = source.withColumn("keys", F.split(F.col("keys"), " "))
    report = verify(spark, pristine, expected=expected, sample_keys=10, **INDEX)
    src = report.checks["source"]
    assert report.ok, report.format()
    assert src.checked == N_SMALL
    assert any("queues are not compared" in n for n in src.notes)
    assert any("xxhash64 digests" in n for n in src.notes)


def test_demo_laid_out_per_store_ingests_without_a_shuffle(
    spark: SparkSession, tmp_path: Path
) -> None:
    """demo_messages(stores=N) + ingest(partitioned=True): N stores, whole queues, green."""
    from pyspark.sql import functions as F

    from rocketstore.spark import ingest, verify
    from rocketstore.spark.jobs import demo_messages

    for stores, queues in ((3, 8), (4, 2)):
        df = demo_messages(spark, 2001, queues=queues, stores=stores)
        assert df.rdd.getNumPartitions() == stores
        root = tmp_path / f"root-{stores}"
        summary = ingest(df, root, stores=stores, partitioned=True, mode="overwrite", **SMALL)
        assert summary["messages"] == 2001
        assert len(summary["stores"]) == stores
        back = spark.read.format("rocketstore").load(str(root))
        per_queue = back.groupBy("topic", "queue_id").agg(F.countDistinct("store").alias("n"))
        if queues >= stores:  # with fewer queues than stores, some stores share a queue id
            assert per_queue.where("n != 1").count() == 0
        report = verify(spark, root, expected=df, sample_keys=10, **INDEX)
        assert report.ok, report.format()


# --------------------------------------------------------------------------------------
# Round trips against the source DataFrame
# --------------------------------------------------------------------------------------


def _ingested(spark: SparkSession, root: Path, n: int) -> DataFrame:
    from rocketstore.spark import ingest

    df = _demo(spark, n)
    summary = ingest(df, root, stores=2, mode="overwrite", **BIG)
    assert summary["messages"] == n
    return df


# `make demo` runs the same ingest + verify of 1,000,000 rows; `make test` has the smaller ones.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_round_trip_1m_messages(spark: SparkSession, tmp_path: Path) -> None:
    """A million rows written and read back equal the source (about 20 s on local[2])."""
    from rocketstore.spark import verify

    root = tmp_path / "root"
    df = _ingested(spark, root, 1_000_000)
    report = verify(spark, root, expected=df, **BIG_INDEX)
    assert report.ok, report.format()
    assert report.messages == 1_000_000
    assert report.checks["source"].checked == 1_000_000
    assert report.checks["crc"].checked == 1_000_000
    shutil.rmtree(root)


def test_round_trip_through_the_data_source_reader(spark: SparkSession, tmp_path: Path) -> None:
    """Every field the source set comes back through ``spark.read.format("rocketstore")``."""
    from pyspark.sql import functions as F

    n = 100_000
    root = tmp_path / "root"
    df = _ingested(spark, root, n)
    cols: list[Column | str] = [
        "topic",
        "queue_id",
        "tags",
        "keys",
        F.sha2("body", 256).alias("body"),
        "born_timestamp",
        "born_host",
    ]
    # The stored map adds TAGS, KEYS, UNIQ_KEY, ...: keep the source's own properties.
    props = F.map_entries(F.map_filter("properties", lambda k, _: k.isin("channel", "region")))
    back = spark.read.format("rocketstore").load(str(root)).select(*cols, props.alias("props"))
    src = df.select(*cols, F.map_entries(F.coalesce("properties", F.create_map())).alias("props"))
    assert back.count() == n
    assert src.exceptAll(back).isEmpty()
    assert back.exceptAll(src).isEmpty()
    shutil.rmtree(root)
