"""A user's script, run as ``<venv>/bin/python standalone_job.py WORKDIR`` by the tests.

It uses only the installed package's public API, the way a cron job or an IDE runs a script:
the interpreter is started by path, the virtualenv is not activated (its ``bin`` is not on
``PATH``) and ``PYSPARK_PYTHON`` is unset. ``import rocketstore.spark`` comes before the
SparkSession, so that Spark's Python workers run this interpreter too.

Steps: a put, an Arrow read and a key lookup on one store, then a Spark write of three rows
into ``WORKDIR/spark-stores`` and a Spark read back. Prints one JSON line with what it saw
(tests/test_wheel.py and tests/test_spark_interpreter.py check it); any failure raises.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import rocketstore
import rocketstore.spark  # before the SparkSession: sets PYSPARK_PYTHON when unset

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
    return {
        "arrow_rows": batch.num_rows,
        "arrow_bodies": [bytes(b or b"").decode() for b in batch.column("body").to_pylist()],
        "lookup": [bytes(m.body or b"").decode() for m in found],
    }


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
        return {
            "worker_python": spark.sparkContext.pythonExec,
            "spark_bodies": sorted(bytes(r["body"]).decode() for r in back),
        }
    finally:
        spark.stop()


def main() -> None:
    work = Path(sys.argv[1]).resolve()
    report: dict[str, object] = {
        "executable": sys.executable,
        "rocketstore_file": rocketstore.__file__,
        "version": rocketstore.__version__,
        "sys_path": sys.path,
        "pyspark_python_env": os.environ.get("PYSPARK_PYTHON"),
    }
    report.update(store_steps(work))
    report.update(spark_steps(work))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
