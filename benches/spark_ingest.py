"""Spark ingest and verify throughput on local[2], beside writing the same DataFrame as Parquet.

For each body size (100 B and 1 KiB by default) the script builds N messages with
``rocketstore.spark.jobs.demo_messages`` (5 topics x 8 queues, tags, keys, properties; bodies
of exactly that size), caches them in Spark memory (so that no step measures generating
them), and then times, in the same Spark session:

* ``parquet``: ``df.write.parquet(...)`` (snappy, Spark's default);
* ``parquet+shuffle``: the same after the repartition ``ingest`` does (one partition per
  store), to separate the shuffle from the write;
* ``ingest``: ``rocketstore.spark.ingest(df, root, stores=S)`` (repartition + the
  ``rocketstore`` data source writer: Arrow batches into ``put_batch``, one store per task);
* ``verify``: ``rocketstore.spark.verify(spark, root)`` (every CRC, framing, consume queue
  unit, gap, index lookup of every key, manifest; one task per store);
* ``verify+source``: the same with ``expected=df`` (adds the Spark comparison with the source:
  SHA-256 of every body on both sides, a shuffle and an aggregation).

A warm-up round on 20,000 messages runs first (JVM code paths, Python workers, the data
source's first planning); ``--repeat`` keeps the best of several runs.

Run (from the repository root; takes a few minutes and ~3 GB of disk per million 1 KiB rows)::

    .venv/bin/python benches/spark_ingest.py                  # 1,000,000 messages per size
    .venv/bin/python benches/spark_ingest.py --messages 200000 --sizes 100,1024 --json out.json

Figures depend on the machine and on what else runs on it; they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _session(master: str, memory: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("rocketstore-bench-spark-ingest")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", memory)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _measure(spark: Any, args: argparse.Namespace, base: Path, size: int) -> dict[str, Any]:
    """One row of the table: every figure for one body size."""
    from pyspark.sql import functions as F

    from rocketstore.cli import demo_geometry
    from rocketstore.spark import ingest, verify
    from rocketstore.spark._demo import demo_messages
    from rocketstore.spark._ingest import _partition_keys, _route

    n = args.messages
    df = demo_messages(spark, n, body_size=size, partitions=2).cache()
    t0 = time.perf_counter()
    assert df.count() == n
    gen_s = time.perf_counter() - t0

    pq = base / f"parquet-{size}"
    t0 = time.perf_counter()
    df.write.mode("overwrite").parquet(str(pq))
    parquet_s = time.perf_counter() - t0
    parquet_bytes = sum(f.stat().st_size for f in pq.rglob("*.parquet"))
    shutil.rmtree(pq)

    # The repartition ingest does (one partition per store), then Parquet.
    keys = _partition_keys(args.stores)
    target = F.element_at(F.array(*[F.lit(k) for k in keys]), _route(df, args.stores) + F.lit(1))
    t0 = time.perf_counter()
    df.repartition(args.stores, target).write.mode("overwrite").parquet(str(pq))
    parquet_shuffled_s = time.perf_counter() - t0
    shutil.rmtree(pq)

    root = base / f"stores-{size}"
    # Index and consume queue files sized for the data (as `rocketstore demo` does).
    geometry = demo_geometry(n, args.stores)
    summary = ingest(
        df,
        root,
        stores=args.stores,
        mode="overwrite",
        mapped_file_size_commit_log=args.file_size,
        **geometry,
    )
    assert summary["messages"] == n
    t0 = time.perf_counter()
    report = verify(spark, root, **geometry)
    verify_s = time.perf_counter() - t0
    assert report.ok, report.format()
    t0 = time.perf_counter()
    report = verify(spark, root, expected=df, **geometry)
    verify_source_s = time.perf_counter() - t0
    assert report.ok, report.format()
    shutil.rmtree(root)
    df.unpersist()
    return {
        "body_size": size,
        "messages": n,
        "stores": args.stores,
        "master": args.master,
        "generate_and_cache_s": gen_s,
        "parquet_s": parquet_s,
        "parquet_bytes": parquet_bytes,
        "parquet_shuffled_s": parquet_shuffled_s,
        "ingest_s": summary["seconds"],
        "store_bytes": summary["bytes"],
        "verify_s": verify_s,
        "verify_source_s": verify_source_s,
        "body_bytes": n * size,
    }


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    spark = _session(args.master, args.driver_memory)
    base = Path(args.dir or tempfile.mkdtemp(prefix="rocketstore-spark-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    try:
        # Warm-up: JVM code paths, Python workers, the data source's first planning.
        warm = argparse.Namespace(**{**vars(args), "messages": 20_000})
        _measure(spark, warm, base, 100)
        for size in args.sizes:
            best: dict[str, Any] | None = None
            for _ in range(args.repeat):
                row = _measure(spark, args, base, size)
                best = (
                    row
                    if best is None
                    else {k: min(v, row[k]) if k.endswith("_s") else v for k, v in best.items()}
                )
            assert best is not None
            rows.append(best)
            _print_row(rows[-1], header=len(rows) == 1)
    finally:
        spark.stop()
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    return rows


def _rate(n: int, s: float) -> str:
    return f"{n / s:>10,.0f}" if s > 0 else f"{'-':>10}"


def _print_row(r: dict[str, Any], *, header: bool) -> None:
    n = r["messages"]
    if header:
        print(
            f"\nmessages/s on {r['master']} ({r['stores']} stores); "
            "same cached DataFrame, same Spark session"
        )
        print(
            f"{'body':>6} {'messages':>10} | {'parquet':>10} {'parquet+sh':>10} | "
            f"{'ingest':>10} {'verify':>10} {'verify+src':>10} | {'ingest MB/s':>11}"
        )
    print(
        f"{r['body_size']:>5}B {n:>10,} | {_rate(n, r['parquet_s'])} "
        f"{_rate(n, r['parquet_shuffled_s'])} | {_rate(n, r['ingest_s'])} "
        f"{_rate(n, r['verify_s'])} {_rate(n, r['verify_source_s'])} | "
        f"{r['body_bytes'] / r['ingest_s'] / 1e6:>11,.1f}"
    )
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[100, 1024],
        help="comma-separated body sizes in bytes (default: 100,1024)",
    )
    parser.add_argument("--stores", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--file-size", type=int, default=256 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; best is shown")
    parser.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
