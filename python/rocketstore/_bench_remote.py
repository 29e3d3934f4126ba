"""``rocketstore bench --remote``: a Spark write and read of a remote root on an S3 server,
beside Parquet on the same server, in one run.

Starts moto's S3 server (``moto[server]``, in the ``dev`` extra) on a loopback port and a
``local[2]`` session with the ``s3a`` settings, then measures on one cached DataFrame of
``messages`` rows (a topic, a body of ``body_bytes`` and a key each):

- ``remote_write_local``: ``df.write.format("rocketstore")`` into a local root (the reference:
  the same job without the object store);
- ``remote_write``: the same into ``s3a://bench/rs`` (each task builds its store on local disk
  and uploads its data extents; the driver copies and commits the manifest);
- ``remote_write_parquet``: each task writes its partition as one Parquet file to the same
  server with ``pyarrow.parquet`` over ``pyarrow.fs.S3FileSystem`` (the client remote roots
  use; Spark's own ``s3a`` connector is not part of PySpark);
- ``remote_read``: ``spark.read.format("rocketstore").load("s3a://bench/rs")`` with a cold
  download cache, counted and ``sum(length(body))``;
- ``remote_read_parquet``: each task reads its file back with ``pyarrow.parquet``.

One untimed warm-up of every path first. CPU is the whole process tree's (this Python, the
JVM, its Python workers) without the server's, which is in ``extra["server_cpu_seconds"]``;
``extra["stored_bytes"]`` is what each format left on the server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rocketstore._bench_common import Figure, tree_cpu_seconds

__all__ = ["REMOTE_NAMES", "run_remote"]

#: The figures of one run, in the order of the page's table, with the baseline of each.
REMOTE_NAMES: dict[str, str | None] = {
    "remote_write_local": None,
    "remote_write": "remote_write_parquet",
    "remote_write_parquet": None,
    "remote_read": "remote_read_parquet",
    "remote_read_parquet": None,
}

_KEY, _SECRET = "bench", "bench-secret"


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one process; 0.0 once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_remote(
    base: Path,
    say: Callable[[str], None],
    *,
    messages: int = 200_000,
    body_bytes: int = 256,
    partitions: int = 2,
) -> list[Figure]:
    """The five figures of :data:`REMOTE_NAMES` (skipped ones say why)."""
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
        import pyspark.sql  # noqa: F401
    except ImportError as e:
        why = f"needs pyspark, boto3 and moto[server] ({e})"
        return [Figure(name, body_bytes, skipped=why) for name in REMOTE_NAMES]
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    work = base / "remote"
    work.mkdir(parents=True, exist_ok=True)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                time.sleep(0.1)
        return _measure(
            f"http://127.0.0.1:{port}",
            server.pid,
            work,
            say,
            shape=(messages, body_bytes, partitions),
        )
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


def _measure(
    endpoint: str,
    server_pid: int,
    work: Path,
    say: Callable[[str], None],
    *,
    shape: tuple[int, int, int],
) -> list[Figure]:
    """The phases of :func:`run_remote` against the server at ``endpoint``; ``shape`` is
    (rows, body bytes, partitions)."""
    n, body_bytes, partitions = shape
    import boto3
    from pyarrow import fs as pafs
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=_KEY,
        aws_secret_access_key=_SECRET,
        region_name="us-east-1",
    )
    client.create_bucket(Bucket="bench")
    import rocketstore.spark  # noqa: F401  (before the session: the JVM connector's jar)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.access.key": _KEY,
        "fs.s3a.secret.key": _SECRET,
        "fs.s3a.path.style.access": "true",
    }
    builder = SparkSession.builder.master("local[2]").appName("rocketstore-bench-remote")
    for k, v in {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.driver.memory": "2g",
        **{f"spark.hadoop.{k}": v for k, v in settings.items()},
    }.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    host = endpoint.split("://", 1)[1]

    def s3() -> Any:
        return pafs.S3FileSystem(
            access_key=_KEY,
            secret_key=_SECRET,
            endpoint_override=host,
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

    def stored(prefix: str) -> int:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix=prefix)
        return sum(o["Size"] for p in pages for o in p.get("Contents", []))

    try:
        df = (
            spark.range(0, n, 1, partitions)
            .select(
                F.concat(F.lit("Topic"), (F.col("id") % 4).cast("string")).alias("topic"),
                F.expr(f"substr(repeat(sha2(cast(id as string), 256), 20), 1, {body_bytes})")
                .cast("binary")
                .alias("body"),
                F.concat(F.lit("k"), F.col("id").cast("string")).alias("keys"),
            )
            .cache()
        )
        df.count()

        def write_rs(frame: Any, uri: str) -> int:
            frame.write.format("rocketstore").mode("overwrite").save(uri)
            return n

        def count(frame: Any) -> int:
            row = frame.agg(F.count("*").alias("n"), F.sum(F.length("body"))).collect()[0]
            return int(row["n"])

        say(f"[remote] warm-up of every path ({n:,} rows of {body_bytes} B to follow) ...")
        small = df.limit(min(n, 20_000)).repartition(partitions)
        write_rs(small, str(work / "warm"))
        write_rs(small, "s3a://bench/warm")
        small.mapInArrow(write_parquet, "rows long").collect()
        warm_cache = str(work / "warm-cache")
        count(
            spark.read.format("rocketstore").option("cacheDir", warm_cache).load("s3a://bench/warm")
        )

        schema = df.schema.simpleString()[len("struct<") : -1].replace(":", " ")
        uri = "s3a://bench/rs"
        phases: list[tuple[str, str, Callable[[], int]]] = [
            (
                "remote_write_local",
                "local root, for reference",
                lambda: write_rs(df, str(work / "rs")),
            ),
            ("remote_write", "df.write.format('rocketstore') to s3a://", lambda: write_rs(df, uri)),
            (
                "remote_write_parquet",
                "pyarrow.parquet over pyarrow.fs, one file per task",
                lambda: sum(r.rows for r in df.mapInArrow(write_parquet, "rows long").collect()),
            ),
            (
                "remote_read",
                "spark.read.format('rocketstore') from s3a://, cold download cache",
                lambda: count(
                    spark.read.format("rocketstore")
                    .option("cacheDir", str(work / "cache"))
                    .load(uri)
                ),
            ),
            (
                "remote_read_parquet",
                "pyarrow.parquet over pyarrow.fs, one file per task",
                lambda: count(
                    spark.range(0, partitions, 1, partitions).mapInArrow(read_parquet, schema)
                ),
            ),
        ]
        figs: list[Figure] = []
        for name, what, fn in phases:
            say(f"[remote] {name} ...")
            srv0, cpu0, t0 = _proc_cpu(server_pid), tree_cpu_seconds(), time.perf_counter()
            rows = fn()
            seconds = time.perf_counter() - t0
            srv = _proc_cpu(server_pid) - srv0
            cpu = tree_cpu_seconds() - cpu0 - srv  # the server is a child of this process
            if rows != n:
                raise RuntimeError(f"rocketstore bench --remote: {name} saw {rows} of {n} rows")
            fig = Figure(name, body_bytes, n, seconds, n * body_bytes, cpu_seconds=cpu)
            fig.baseline = REMOTE_NAMES[name]
            fig.note = (
                f"{what}; local[{partitions}], {partitions} tasks, moto S3 server on loopback"
            )
            fig.extra["server_cpu_seconds"] = round(srv, 3)
            figs.append(fig)
        by = {f.name: f for f in figs}
        by["remote_write"].extra["stored_bytes"] = stored("rs/store-")
        by["remote_write_parquet"].extra["stored_bytes"] = stored("pq/")
        for f in figs:
            base_fig = by.get(f.baseline or "")
            if base_fig is not None and base_fig.msgs_per_s:
                f.ratio = f.msgs_per_s / base_fig.msgs_per_s
        df.unpersist()
        return figs
    finally:
        spark.stop()
