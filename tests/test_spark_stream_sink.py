"""``df.writeStream.format("rocketstore")``: exactly-once stores per micro-batch.

A file-source stream is written into a store root, stopped, and restarted on the same
checkpoint with its last micro-batch replayed (its commit removed from the checkpoint, and,
harder, its manifest entries too, as if the driver died right after the publishing rename):
every source row ends up stored exactly once. A micro-batch with one bad row fails whole:
the good task's store is not published, the error names the row; after the row is fixed, the
restarted stream stores the replayed batch once.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import rocketstore.spark
from rocketstore.spark import MANIFEST
from rocketstore.spark._stream_writer import batch_dir_name
from rocketstore.spark.verify import verify_local

pytestmark = pytest.mark.spark

SCHEMA = "topic string, body string, keys string"


def _write_file(src: Path, name: str, rows: list[dict[str, Any]]) -> None:
    tmp = src / f".{name}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.rename(src / name)


def _rows(tag: str, n: int, topic: str = "Orders") -> list[dict[str, Any]]:
    return [{"topic": topic, "body": f"{tag}-{i}", "keys": f"k{i % 7}"} for i in range(n)]


def _start(spark: SparkSession, src: Path, root: Path, ckpt: Path, files: int = 1) -> Any:
    return (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", files)
        .json(str(src))
        .writeStream.format("rocketstore")
        .option("checkpointLocation", str(ckpt))
        .option("queueNums", "3")
        .trigger(availableNow=True)
        .start(str(root))
    )


def _stored(spark: SparkSession, root: Path) -> Counter[str]:
    df = spark.read.format("rocketstore").load(str(root)).select("body")
    return Counter(bytes(r.body).decode() for r in df.collect())


def test_restart_with_replayed_batch_stores_every_row_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    rocketstore.spark.register(spark)
    src, root, ckpt = tmp_path / "src", tmp_path / "root", tmp_path / "ckpt"
    src.mkdir()
    _write_file(src, "a.json", _rows("a", 50))
    _write_file(src, "b.json", _rows("b", 40))
    q = _start(spark, src, root, ckpt)
    q.awaitTermination(180)
    assert q.exception() is None
    assert (root / batch_dir_name("stream", 0)).is_dir()
    assert (root / batch_dir_name("stream", 1)).is_dir()
    manifest = json.loads((root / MANIFEST).read_text())
    assert manifest["streams"]["stream"]["batch_id"] == 1

    # The driver "died" after publishing batch 1 but before recording it: in the checkpoint
    # (Spark replays it) and in the manifest (the replay must add it back, not store it twice).
    (ckpt / "commits" / "1").unlink()
    (ckpt / "commits" / ".1.crc").unlink(missing_ok=True)  # Hadoop's checksum of it
    manifest["stores"] = [e for e in manifest["stores"] if e.get("batch_id") != 1]
    manifest["streams"]["stream"]["batch_id"] = 0
    (root / MANIFEST).write_text(json.dumps(manifest))
    _write_file(src, "c.json", _rows("c", 30))

    q = _start(spark, src, root, ckpt)
    q.awaitTermination(180)
    assert q.exception() is None

    want = Counter(r["body"] for tag, n in (("a", 50), ("b", 40), ("c", 30)) for r in _rows(tag, n))
    assert _stored(spark, root) == want
    manifest = json.loads((root / MANIFEST).read_text())
    assert manifest["streams"]["stream"]["batch_id"] == 2
    assert sorted({e["batch_id"] for e in manifest["stores"]}) == [0, 1, 2]
    assert sum(e["messages"] for e in manifest["stores"]) == 120
    assert not list((root / "_temporary").rglob("commitlog"))
    report = verify_local(root)
    assert report.ok, report.format(examples=5)
    assert report.messages == 120


def test_failed_batch_publishes_nothing_and_names_the_row(
    spark: SparkSession, tmp_path: Path
) -> None:
    rocketstore.spark.register(spark)
    src, root, ckpt = tmp_path / "src", tmp_path / "root", tmp_path / "ckpt"
    src.mkdir()
    _write_file(src, "a.json", _rows("a", 20))
    q = _start(spark, src, root, ckpt, files=2)
    q.awaitTermination(180)
    assert q.exception() is None
    before = _stored(spark, root)

    # One good file and one with a bad topic on its 4th row, in one micro-batch of 2 tasks.
    _write_file(src, "b.json", _rows("b", 30))
    bad = _rows("x", 6)
    bad[3]["topic"] = "no spaces allowed"
    _write_file(src, "c.json", bad)
    q = _start(spark, src, root, ckpt, files=2)
    with pytest.raises(Exception) as failed:  # noqa: PT011 (Spark wraps it; the text is checked)
        q.awaitTermination(180)
    text = str(failed.value)
    assert "topic" in text, text[:2000]
    assert "message 3" in text, text[:2000]  # the bad row, counted within its task

    assert not (root / batch_dir_name("stream", 1)).exists()
    assert _stored(spark, root) == before
    manifest = json.loads((root / MANIFEST).read_text())
    assert manifest["streams"]["stream"]["batch_id"] == 0

    # Fix the bad row and restart: Spark replays batch 1 with the same files; it is stored once
    # and the failed run's leftovers under _temporary are gone.
    bad[3]["topic"] = "Orders"
    (src / "c.json").write_text("".join(json.dumps(r) + "\n" for r in bad))
    q = _start(spark, src, root, ckpt, files=2)
    q.awaitTermination(180)
    assert q.exception() is None
    want = before + Counter(r["body"] for r in _rows("b", 30) + bad)
    assert _stored(spark, root) == want
    assert not list((root / "_temporary").rglob("commitlog"))
