"""Spark ingest and read of a remote root on an S3 server beside Parquet on the same server.

    .venv/bin/python benches/remote_s3.py [--messages N] [--body-bytes B]

Starts moto's S3 server (``moto[server]``) on a loopback port, a ``local[2]`` session, and
measures, in one run, on the same cached DataFrame:

- rocketstore on a local root (for reference: the same job without the object store);
- rocketstore: ``df.write.format("rocketstore").save("s3a://bench/rs")`` (tasks build stores on
  local disk, upload their data extents, the driver copies and commits the manifest), then
  ``spark.read.format("rocketstore").load(...)`` with a cold download cache;
- Parquet (the baseline): each task writes its partition as one Parquet file to the same
  server with ``pyarrow.parquet`` over ``pyarrow.fs.S3FileSystem`` (the client rocketstore
  uses; Spark's own s3a connector is not part of PySpark), then each task reads one file back.

One untimed warm-up of every path first. Each phase reports messages/s and the CPU time per
message of the whole process tree (this Python, the Spark JVM and its Python workers; the S3
server's CPU is reported apart), and the bytes each format put on the server.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of(pids: set[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return total


def _tree(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo.extend(children.get(pid, []))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=400_000)
    ap.add_argument("--body-bytes", type=int, default=256)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    settings = {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.access.key": "bench",
        "fs.s3a.secret.key": "bench-secret",
        "fs.s3a.path.style.access": "true",
    }
    work = Path(tempfile.mkdtemp(prefix="rocketstore-remote-bench-"))
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                time.sleep(0.1)
        run(args, settings, server.pid, work)
    finally:
        server.terminate()
        server.wait()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, settings: dict[str, str], server_pid: int, work: Path) -> None:
    import boto3
    from pyarrow import fs as pafs
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    boto3.client(
        "s3",
        endpoint_url=settings["fs.s3a.endpoint"],
        aws_access_key_id="bench",
        aws_secret_access_key="bench-secret",
        region_name="us-east-1",
    ).create_bucket(Bucket="bench")
    import rocketstore.spark  # noqa: F401  (before the session: the JVM connector's jar)

    builder = SparkSession.builder.master("local[2]").appName("rocketstore-remote-bench")
    for k, v in {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.local.dir": str(work / "local"),
        "spark.driver.memory": "2g",
        **{f"spark.hadoop.{k}": v for k, v in settings.items()},
    }.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    n = args.messages
    df = (
        spark.range(0, n, 1, args.partitions)
        .select(
            F.concat(F.lit("Topic"), (F.col("id") % 4).cast("string")).alias("topic"),
            F.expr(f"substr(repeat(sha2(cast(id as string), 256), 20), 1, {args.body_bytes})")
            .cast("binary")
            .alias("body"),
            F.concat(F.lit("k"), F.col("id").cast("string")).alias("keys"),
        )
        .cache()
    )
    df.count()
    endpoint = settings["fs.s3a.endpoint"].split("://", 1)[1]

    def s3() -> Any:
        return pafs.S3FileSystem(
            access_key="bench",
            secret_key="bench-secret",
            endpoint_override=endpoint,
            scheme="http",
            region="us-east-1",
        )

    def write_parquet(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx else 0
        table = pa.Table.from_batches(list(batches))
        pq.write_table(table, f"bench/pq/part-{part:05d}.parquet", filesystem=s3())
        yield pa.RecordBatch.from_pylist([{"rows": table.num_rows}])

    def read_parquet(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow.parquet as pq

        for b in batches:
            for i in b.column(0).to_pylist():
                f = pq.ParquetFile(f"bench/pq/part-{i:05d}.parquet", filesystem=s3())
                yield from f.iter_batches(batch_size=16384)

    me = os.getpid()
    results: list[tuple[str, float, float, float]] = []

    def phase(name: str, fn: Callable[[], int]) -> None:
        pids = _tree(me) - {server_pid}
        cpu0, srv0, t0 = _cpu_of(pids), _cpu_of({server_pid}), time.perf_counter()
        rows = fn()
        wall = time.perf_counter() - t0
        pids |= _tree(me) - {server_pid}
        cpu, srv = _cpu_of(pids) - cpu0, _cpu_of({server_pid}) - srv0
        assert rows == n, (name, rows)
        results.append((name, wall, cpu, srv))

    # Untimed warm-up of every path (JVM code generation, Python workers, the S3 client).
    small = df.limit(20_000).repartition(args.partitions)
    _write_rs(small, str(work / "warm"), 0)
    _write_rs(small, "s3a://bench/warm", 0)
    small.mapInArrow(write_parquet, "rows long").collect()
    spark.read.format("rocketstore").option("cacheDir", str(work / "warm-cache")).load(
        "s3a://bench/warm"
    ).count()

    uri = "s3a://bench/rs"
    phase("rocketstore write, local root (reference)", lambda: _write_rs(df, str(work / "rs"), n))
    phase("rocketstore write", lambda: _write_rs(df, uri, n))
    phase(
        "Parquet write (pyarrow.fs)",
        lambda: sum(r.rows for r in df.mapInArrow(write_parquet, "rows long").collect()),
    )
    phase(
        "rocketstore read (cold cache)",
        lambda: int(
            spark.read.format("rocketstore")
            .option("cacheDir", str(work / "cache"))
            .load(uri)
            .agg(F.count("*").alias("n"), F.sum(F.length("body")))
            .collect()[0]["n"]
        ),
    )
    schema = df.schema.simpleString()[len("struct<") : -1].replace(":", " ")
    phase(
        "Parquet read (pyarrow.fs)",
        lambda: int(
            spark.range(0, args.partitions, 1, args.partitions)
            .mapInArrow(read_parquet, schema)
            .agg(F.count("*").alias("n"), F.sum(F.length("body")))
            .collect()[0]["n"]
        ),
    )
    client = boto3.client(
        "s3",
        endpoint_url=settings["fs.s3a.endpoint"],
        aws_access_key_id="bench",
        aws_secret_access_key="bench-secret",
        region_name="us-east-1",
    )

    def stored(prefix: str) -> int:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix=prefix)
        return sum(o["Size"] for p in pages for o in p.get("Contents", []))

    print(
        f"\non the server: rocketstore {stored('rs/store-') / 1e6:.1f} MB (data extents of the "
        f"stores), Parquet {stored('pq/') / 1e6:.1f} MB"
    )
    print(
        f"\n{n:,} messages, {args.body_bytes} B bodies, {args.partitions} tasks, local[2], "
        "moto S3 server on loopback\n"
    )
    print("| phase | msg/s | CPU µs/msg (Spark + Python) | S3 server CPU µs/msg |")
    print("|---|---:|---:|---:|")
    for name, wall, cpu, srv in results:
        print(f"| {name} | {n / wall:,.0f} | {cpu / n * 1e6:.1f} | {srv / n * 1e6:.1f} |")
    spark.stop()


def _write_rs(df: Any, uri: str, n: int) -> int:
    df.write.format("rocketstore").mode("overwrite").save(uri)
    return n


if __name__ == "__main__":
    main()
