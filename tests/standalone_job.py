"""A user's script, run as ``<venv>/bin/python standalone_job.py [--no-spark] WORKDIR``.

It uses only the installed package's public API, the way a cron job or an IDE runs a script:
the interpreter is started by path, the virtualenv is not activated (its ``bin`` is not on
``PATH``) and ``PYSPARK_PYTHON`` is unset. ``import rocketstore.spark`` comes before the
SparkSession, so that Spark's Python workers run this interpreter too.

Steps: a put, an Arrow read and a key lookup on one store, then a Spark write of three rows
into ``WORKDIR/spark-stores`` and a Spark read back (skipped with ``--no-spark``). Prints one
JSON line with what it saw (tests/test_wheel.py, tests/test_spark_interpreter.py and the
release workflow check it); a wrong result fails an assertion (exit status 1).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import rocketstore

SMALL: dict[str, Any] = {
    "mapped_file_size_commit_log": 1 << 20,
    "mapped_file_size_consume_queue": 300 * 20,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
}


def store_steps(work: Path) -> dict[str, object]:
    """A put, an Arrow read of the commit log, and a lookup by key."""
    path = work / "store"
    with rocketstore.MessageStore(path, **SMALL) as store:
        put = store.put("OrderTopic", b"hello wheel", tags="TagA", keys=["order-1"])
        assert put.status == "PUT_OK", put.status
    # Reopened read-only: the clean close has dispatched the index and consume queues.
    with rocketstore.MessageStore(path, read_only=True, **SMALL) as store:
        batch, _next_offset = store.read_arrow()
        found = store.query_message("OrderTopic", "order-1")
    report = {
        "arrow_rows": batch.num_rows,
        "arrow_bodies": [bytes(b or b"").decode() for b in batch.column("body").to_pylist()],
        "lookup": [bytes(m.body or b"").decode() for m in found],
    }
    assert report["arrow_bodies"] == ["hello wheel"], report
    assert report["lookup"] == ["hello wheel"], report
    return report


def spark_steps(work: Path) -> dict[str, object]:
    """A ``df.write.format("rocketstore")`` of three rows and a read back."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("rocketstore-standalone-job")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.local.dir", str(work / "spark-local"))
        .config("spark.sql.warehouse.dir", str(work / "spark-warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        root = str(work / "spark-stores")
        rows = [("OrderTopic", f"spark-{i}".encode(), [f"k{i}"]) for i in range(3)]
        df = spark.createDataFrame(rows, "topic string, body binary, keys array<string>")
        df.write.format("rocketstore").mode("append").save(root)
        back = spark.read.format("rocketstore").load(root).select("topic", "body").collect()
        bodies = sorted(bytes(r["body"]).decode() for r in back)
        assert bodies == ["spark-0", "spark-1", "spark-2"], bodies
        return {
            "pyspark_python_env": os.environ.get("PYSPARK_PYTHON"),
            "worker_python": spark.sparkContext.pythonExec,
            "spark_bodies": bodies,
        }
    finally:
        spark.stop()


def main() -> None:
    args = sys.argv[1:]
    with_spark = "--no-spark" not in args
    work = Path(next(a for a in args if not a.startswith("--"))).resolve()
    report: dict[str, object] = {
        "executable": sys.executable,
        "rocketstore_file": rocketstore.__file__,
        "version": rocketstore.__version__,
        "sys_path": sys.path,
    }
    report.update(store_steps(work))
    if with_spark:
        # Before the SparkSession: sets PYSPARK_PYTHON to this interpreter when unset.
        importlib.import_module("rocketstore.spark")
        report.update(spark_steps(work))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
