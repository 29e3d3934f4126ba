"""A streaming query into the rocketstore sink, run as a child process by
tests/test_spark_stream_sink.py so that the test can kill it (``kill -9`` of its process group:
driver, JVM and Python workers) in the middle of a micro-batch.

Usage: ``python _stream_sink_child.py SRC ROOT CHECKPOINT``. JSON files in SRC, two per
micro-batch, go to ``stores=2`` stores under ROOT with ``trigger(availableNow=True)``; failures
are injected through ``ROCKETSTORE_SINK_FAILPOINT`` (see ``rocketstore.spark._stream_writer``).
Spark retries a failed task up to 3 times (``local[2,4]``). Exits 0 when the query ended cleanly.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def main() -> int:
    src, root, ckpt = sys.argv[1:4]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("rocketstore-sink-child")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")  # the test reads the lost tasks
    import rocketstore.spark

    rocketstore.spark.register(spark)
    query = (
        spark.readStream.schema("topic string, body string, keys string")
        .option("maxFilesPerTrigger", 2)
        .json(src)
        .writeStream.format("rocketstore")
        .option("checkpointLocation", ckpt)
        .option("stores", 2)
        .option("queueNums", 3)
        .option("mappedFileSizeCommitLog", 1 << 20)
        .trigger(availableNow=True)
        .start(root)
    )
    query.awaitTermination()
    return 0 if query.exception() is None else 1


if __name__ == "__main__":
    sys.exit(main())
