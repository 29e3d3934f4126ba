"""Spark read: ``format("rocketstore")`` against Parquet over the same rows, alternated.

Writes the ``rocketstore bench`` table of each body size once as Parquet and as a rocketstore
root (2 partitions, like ``rocketstore bench --spark``), then in one local[2] session times
``sum(length(body))`` over: Parquet, rocketstore with the full schema, rocketstore with
``.schema("body binary")``, round after round. The session loads the JVM reader when it was
built (``make build``): ``all`` and ``body`` are then its reads, and a name ending in ``_py``
(``all_py``, ``body_py``) is the same read by the Python reader in the same session
(``spark.rocketstore.jvmReader=false``); ``--only parquet,all,all_main`` adds the full
schema read as main's reader did it (the open's CRC walk, no frozen heap). Each line:
msg/s (wall) and CPU ns per message of the whole process tree (driver, JVM, Python workers;
/proc), and the load average.

    .venv/bin/python benches/spark_read.py --sizes 100,1024 --rounds 3
    # baseline: the same script with another checkout's package first on the path
    PYTHONPATH=/path/to/main/python .venv/bin/python benches/spark_read.py ...
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any


def _main_like_source() -> Any:
    """``rocketstore`` whose reader does not freeze the worker's heap (the reader before it
    did); with ``checkCRCOnRecover=true`` it reads as main's reader did."""
    from rocketstore.spark import _heap, _reader
    from rocketstore.spark._source import RocketStoreDataSource

    class GcOnReader(_reader.RocketStoreReader):
        def read(self, partition: Any) -> Any:
            if not isinstance(
                partition, (_reader.FilePartition, _reader.QueuePartition, _reader.IndexPartition)
            ):
                return iter(())
            _heap._reset()
            return _reader._read_partition(self.settings, self.schema, partition)

    class MainLikeSource(RocketStoreDataSource):
        @classmethod
        def name(cls) -> str:
            return "rs_main_like"

        def reader(self, schema: Any) -> Any:
            return GcOnReader(self.options, schema)

    return MainLikeSource


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--messages", type=int, default=0, help="default: as rocketstore bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir()))
    ap.add_argument(
        "--only", default="parquet,all,all_py,body_py", help="which reads, comma-separated"
    )
    args = ap.parse_args()

    import rocketstore
    from rocketstore._bench import (
        BenchOptions,
        _tree_cpu_seconds,
        bench_spark_session,
        bench_table,
        spark_input_table,
        spark_median_line,
    )

    print(f"rocketstore from {Path(rocketstore.__file__).parent}", flush=True)
    from pyspark.sql import functions as F

    spark = bench_spark_session("rocketstore-spark-read")
    import rocketstore.spark as rs_spark
    from rocketstore.spark._jvm import ENABLED_CONF, jvm_reader_files

    print(f"JVM reader: {'loaded' if jvm_reader_files() else 'not built'}", flush=True)

    rs_spark.register(spark)
    if "all_main" in args.only:
        spark.dataSource.register(_main_like_source())
    opts = BenchOptions()
    base = Path(args.dir) / "rocketstore-spark-read"
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            n = args.messages or opts.messages_for(size)
            pq, rs = base / f"{size}-{n}.parquet", base / f"{size}-{n}.rs"
            if not (pq / "_SUCCESS").exists() or not (rs / "_SUCCESS").exists():
                plain = spark_input_table(bench_table(n, size))
                df = spark.createDataFrame(plain).repartition(2)
                df.write.mode("overwrite").parquet(str(pq))
                (
                    df.write.format("rocketstore")
                    .mode("overwrite")
                    .option("mapped_file_size_commit_log", str(opts.file_size))
                    .save(str(rs))
                )
            readers: dict[str, Any] = {
                "parquet": lambda pq=pq: spark.read.parquet(str(pq)),
                "all": lambda rs=rs: spark.read.format("rocketstore").load(str(rs)),
                # main's read path: the open's CRC walk of the tail, no frozen heap
                "all_main": lambda rs=rs: (
                    spark.read.format("rs_main_like")
                    .option("checkCRCOnRecover", "true")
                    .load(str(rs))
                ),
                "body": lambda rs=rs: (
                    spark.read.format("rocketstore").schema("body binary").load(str(rs))
                ),
            }
            readers["all_py"] = readers["all"]
            readers["body_py"] = readers["body"]
            names = [x for x in args.only.split(",") if x]

            def run(name: str, readers: dict[str, Any] = readers) -> Any:
                spark.conf.set(ENABLED_CONF, "false" if name.endswith("_py") else "true")
                return readers[name]().agg(F.sum(F.length("body"))).collect()[0][0]

            for name in names:  # warm-up
                run(name)
            got: dict[str, list[tuple[float, float]]] = {x: [] for x in names}
            for r in range(args.rounds):
                for name in names:
                    c0, t0 = _tree_cpu_seconds(), time.perf_counter()
                    total = run(name)
                    wall, cpu = time.perf_counter() - t0, _tree_cpu_seconds() - c0
                    got[name].append((wall, cpu))
                    print(
                        f"{size:5d} B round {r} {name:8s} {n / wall:12,.0f} msg/s "
                        f"{cpu * 1e9 / n:8,.0f} CPU ns/msg  sum={total}  "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
            for name in names:
                print(spark_median_line(got, name, size, n, 8), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
