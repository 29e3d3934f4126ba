"""The Spark options take the file geometry (commit log, consume queue and index sizes) from
the stores' own files: reading, verifying, appending to and streaming into a root of stores
made with non-default sizes needs no options, and an option that contradicts a store's files is
refused on the driver, before any task runs, naming the option as the user spelled it and the
value the files hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType

import rocketstore
import rocketstore.spark
from rocketstore.exceptions import InvalidConfigError

CL = 1 << 20  # commit log file size (default 1 GiB)
CQ = 6000  # consume queue file size: 300 units (default 300,000)
SLOTS, ENTRIES = 100, 400  # index geometry (default 5,000,000 / 20,000,000)
INDEX = 40 + 4 * SLOTS + 20 * ENTRIES
GEOMETRY = {
    "mappedFileSizeCommitLog": str(CL),
    "mappedFileSizeConsumeQueue": str(CQ),
    "maxHashSlotNum": str(SLOTS),
    "maxIndexNum": str(ENTRIES),
}
SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("body", StringType()),
        StructField("keys", StringType()),
    ]
)


def _rows(tag: str, n: int) -> list[tuple[str, str, str]]:
    return [("Orders", f"{tag}-{i}", f"k{i}") for i in range(n)]


def _sizes(store: Path) -> tuple[set[int], set[int], set[int]]:
    def lens(d: Path) -> set[int]:
        return {p.stat().st_size for p in d.rglob("*") if p.is_file()} if d.is_dir() else set()

    return lens(store / "commitlog"), lens(store / "consumequeue"), lens(store / "index")


def _write(spark: SparkSession, root: Path, rows: list[Any], mode: str, **options: str) -> None:
    w = spark.createDataFrame(rows, SCHEMA).coalesce(1).write.format("rocketstore").mode(mode)
    for k, v in options.items():
        w = w.option(k, v)
    w.save(str(root))


def _refused(e: pytest.ExceptionInfo[BaseException], option: str, found: int) -> None:
    text = str(e.value)
    assert option in text, text
    assert str(found) in text, text


@pytest.mark.spark
def test_spark_takes_the_geometry_from_the_files_and_refuses_a_contradiction(
    spark: SparkSession, tmp_path: Path
) -> None:
    from rocketstore.spark._reader import MESSAGE_SCHEMA, RocketStoreReader
    from rocketstore.spark._writer import RocketStoreWriter
    from rocketstore.spark.verify import verify_local

    rocketstore.spark.register(spark)
    root = tmp_path / "root"
    _write(spark, root, _rows("a", 20), "overwrite", **GEOMETRY)
    stores = sorted(p for p in root.iterdir() if p.name.startswith("store-"))
    assert [_sizes(s) for s in stores] == [({CL}, {CQ}, {INDEX})]

    # Appending without the options: the new store has the root's geometry.
    _write(spark, root, _rows("b", 10), "append")
    stores = sorted(p for p in root.iterdir() if p.name.startswith("store-"))
    assert [_sizes(s) for s in stores] == [({CL}, {CQ}, {INDEX})] * 2
    manifest = json.loads((root / "_SUCCESS").read_text())
    assert manifest["stores"][1]["config"]["mapped_file_size_commit_log"] == CL

    # Reading every table and verifying, without the options.
    df = spark.read.format("rocketstore").load(str(root))
    assert sorted(bytes(r.body).decode() for r in df.select("body").collect()) == sorted(
        r[1] for r in _rows("a", 20) + _rows("b", 10)
    )
    cq = spark.read.format("rocketstore").option("table", "consumequeue").load(str(root))
    assert cq.count() == 30
    index = spark.read.format("rocketstore").option("table", "index").load(str(root))
    assert index.count() >= 30
    assert verify_local(root, max_index_num=ENTRIES).ok  # agreeing values are fine

    # Contradicting options are refused on the driver, named as spelled, with the files' value.
    for option, value, found in [
        ("mappedFileSizeCommitLog", str(CL * 2), CL),
        ("mapped_file_size_consume_queue", "12000", CQ),
        ("maxIndexNum", "800", INDEX),
        ("mappedFileSizeCommitLog", str(1 << 30), CL),  # RocketMQ's default, given explicitly
    ]:
        opts = {"path": str(root), option: value}
        with pytest.raises(InvalidConfigError) as e:
            RocketStoreReader(opts, MESSAGE_SCHEMA).partitions()
        _refused(e, option, found)
        assert e.value.key == option
        with pytest.raises(InvalidConfigError) as e:
            RocketStoreWriter(opts, SCHEMA, overwrite=False, live_marker=False)
        _refused(e, option, found)
        assert e.value.key == option
    with pytest.raises(InvalidConfigError) as e:
        verify_local(root, mapped_file_size_commit_log=CL * 2)
    _refused(e, "mapped_file_size_commit_log", CL)
    # Through Spark the job fails before any task with the same message.
    with pytest.raises(Exception) as failed:  # noqa: PT011 (Spark wraps the data source's error)
        spark.read.format("rocketstore").option("mappedFileSizeCommitLog", CL * 4).load(
            str(root)
        ).count()
    _refused(failed, "mappedFileSizeCommitLog", CL)
    # Overwriting replaces the stores: the options given there are the new stores' own.
    _write(spark, root, _rows("c", 5), "overwrite")
    stores = sorted(p for p in root.iterdir() if p.name.startswith("store-"))
    assert [_sizes(s)[0] for s in stores] == [{1 << 30}]


def test_stream_sink_restarts_with_the_roots_geometry(tmp_path: Path) -> None:
    from rocketstore.spark._stream_writer import RocketStoreStreamWriter, store_name

    root = tmp_path / "root"
    w = RocketStoreStreamWriter({"path": str(root), "stores": "2", **GEOMETRY}, SCHEMA)
    assert w.writer.config["mapped_file_size_commit_log"] == CL
    # Store 0 exists (a batch wrote it), store 1 not yet.
    config: dict[str, Any] = dict(w.writer.config)
    with rocketstore.MessageStore(root / store_name(0), **config) as s:
        s.put("Orders", b"x", keys=["k"])
    # A restart without the options: both stores get the root's geometry.
    w = RocketStoreStreamWriter({"path": str(root), "stores": "2"}, SCHEMA)
    for key, value in [
        ("mapped_file_size_commit_log", CL),
        ("mapped_file_size_consume_queue", CQ),
        ("max_hash_slot_num", SLOTS),
        ("max_index_num", ENTRIES),
    ]:
        assert w.writer.config[key] == value, key
    with pytest.raises(InvalidConfigError) as e:
        RocketStoreStreamWriter(
            {"path": str(root), "stores": "2", "mappedFileSizeCommitLog": str(CL * 2)}, SCHEMA
        )
    _refused(e, "mappedFileSizeCommitLog", CL)
    # Without any store file yet, the root's metadata is what a contradiction is checked against.
    fresh = tmp_path / "fresh"
    RocketStoreStreamWriter({"path": str(fresh), "mappedFileSizeCommitLog": str(CL)}, SCHEMA)
    with pytest.raises(InvalidConfigError) as e:
        RocketStoreStreamWriter(
            {"path": str(fresh), "mappedFileSizeCommitLog": str(CL * 2)}, SCHEMA
        )
    _refused(e, "mappedFileSizeCommitLog", CL)
    assert e.value.key == "mappedFileSizeCommitLog"
