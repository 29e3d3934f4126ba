"""Spark write: ``format("rocketstore")`` against Parquet and a no-op Python writer, alternated.

Builds the ``rocketstore bench`` table of each body size, caches it as a 2-partition DataFrame in
a local[2] session (as ``rocketstore bench --spark``; ``--partitions`` for more tasks), then
times round after round:

* ``parquet``: ``df.write.parquet`` (snappy);
* ``parquet_durable``: the same, then ``fsync`` of every file and directory it wrote (a published
  store is durable; Spark's file commit syncs nothing; ``--only`` it);
* ``noop``: a Python ``DataSourceArrowWriter`` that only counts the Arrow batches Spark hands it
  (the JVM -> Python worker transfer, nothing written): the floor of any Python data source;
* ``noop_nogc``: the same with the worker's heap frozen (``--only`` it);
* ``rocketstore``: ``df.write.format("rocketstore")``;
* ``rocketstore_lz4``: the same with ``compressionType=lz4``, ``compressOver=0``: every body
  compressed as a RocketMQ producer does (SYSFLAG 0x101), as Parquet compresses its pages
  (``--only`` it);
* ``rocketstore_transient``: the same with ``transient_store_pool_enable`` (``--only`` it);
* ``rocketstore_pwrite`` / ``rocketstore_mapping``: the same with ``pwrite_commit_log`` on / off
  (records staged and ``pwrite``n, or stored into the mapping; ``--only`` them);
* ``rocketstore_gc_on``: the same without the frozen worker heap (``--only``);
* ``profiled``: the same writer with per-step thread CPU in the Python worker (``--profile``).

Each line: msg/s (wall) and CPU ns per message of the whole process tree (driver, JVM, Python
workers; /proc), then, with ``--threads``, that CPU split by process and thread name (JVM
``Executor task launch worker``, ``C2 CompilerThread``, ``GC Thread``...; Python worker main
thread, ``rs-reput``, ``rs-flush``...), summed over the rounds.

    .venv/bin/python benches/spark_write.py --sizes 100,1024 --rounds 3 --threads --profile
    # baseline: the same script with another checkout's package first on the path
    PYTHONPATH=/path/to/main/python .venv/bin/python benches/spark_write.py ...
    # a Spark conf for every write, e.g. the Arrow batch size of the JVM -> Python hop:
    .venv/bin/python benches/spark_write.py --conf spark.sql.execution.arrow.maxRecordsPerBatch=2000
    # incompressible bodies instead of the bench's filler (which Parquet compresses ~17x):
    .venv/bin/python benches/spark_write.py --sizes 1024 --only parquet,rocketstore --bodies random
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

_TICK = os.sysconf("SC_CLK_TCK")


def _threads() -> dict[tuple[int, int], tuple[str, str, int]]:
    """(pid, tid) -> (process role, thread name, CPU ticks) over this process tree."""
    procs: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    text = fh.read()
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            rest = text[text.rindex(")") + 2 :].split()
            procs[int(name)] = (int(rest[1]), cmd)
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _) in procs.items():
        children[ppid].append(pid)
    out: dict[tuple[int, int], tuple[str, str, int]] = {}
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        cmd = procs.get(pid, (0, ""))[1]
        role = "driver" if pid == os.getpid() else ("jvm" if "java" in cmd else "pyworker")
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                    text = fh.read()
            except OSError:
                continue
            comm = text[text.index("(") + 1 : text.rindex(")")]
            rest = text[text.rindex(")") + 2 :].split()
            comm = re.sub(r"[-# ]?\d+$", "", comm).strip()  # "GC Thread#3" -> "GC Thread"
            if role == "pyworker" and int(tid) == pid:
                comm = "main"
            out[(pid, int(tid))] = (role, comm, int(rest[11]) + int(rest[12]))
    return out


def _delta(a: dict[Any, Any], b: dict[Any, Any]) -> dict[tuple[str, str], float]:
    """CPU seconds per (role, thread name) between two snapshots (threads that ended are lost)."""
    got: dict[tuple[str, str], float] = defaultdict(float)
    for key, (role, comm, ticks) in b.items():
        before = a.get(key, (role, comm, 0))[2]
        if ticks > before:
            got[(role, comm)] += (ticks - before) / _TICK
    return got


class NoopWriter(DataSourceArrowWriter):
    """Counts the Arrow batches of its task (the JVM -> Python transfer only)."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return WriterCommitMessage()


class NoopGcWriter(DataSourceArrowWriter):
    """The same with the worker's heap frozen, as the rocketstore writer does."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from rocketstore.spark._heap import freeze_worker_heap

        freeze_worker_heap()
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return WriterCommitMessage()


class NoopSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rs_noop"

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        return NoopGcWriter() if self.options.get("gc") == "off" else NoopWriter()


def _gc_on_source() -> type[DataSource]:
    """``rocketstore`` without the frozen worker heap (the writer before it froze it): the
    same-session baseline of that change."""
    from rocketstore.spark import _heap, _writer
    from rocketstore.spark._source import RocketStoreDataSource

    class GcOnWriter(_writer.RocketStoreWriter):
        def write(self, iterator: Iterator[Any]) -> Any:
            _heap._reset()  # unfreeze: PySpark's collection after the task walks every object
            return self._write(iterator)

    class GcOnSource(RocketStoreDataSource):
        @classmethod
        def name(cls) -> str:
            return "rs_gc_on"

        def writer(self, schema: Any, overwrite: bool) -> Any:
            return GcOnWriter(self.options, schema, overwrite)

    return GcOnSource


def _profiled_source() -> type[DataSource]:
    """``rocketstore`` with thread CPU per step of each write task, printed by the worker."""
    from rocketstore.spark import _writer
    from rocketstore.spark._source import RocketStoreDataSource

    class ProfiledWriter(_writer.RocketStoreWriter):
        def write(self, iterator: Iterator[Any]) -> Any:
            steps: dict[str, float] = defaultdict(float)
            rows = 0
            t = time.thread_time

            def timed(name: str, f: Any) -> Any:
                def inner(*a: Any, **k: Any) -> Any:
                    c = t()
                    try:
                        return f(*a, **k)
                    finally:
                        steps[name] += t() - c

                return inner

            def batches() -> Iterator[Any]:
                nonlocal rows
                it = iter(iterator)
                while True:
                    c = t()
                    try:
                        b = next(it)
                    except StopIteration:
                        steps["next (Arrow from JVM)"] += t() - c
                        return
                    steps["next (Arrow from JVM)"] += t() - c
                    rows += b.num_rows
                    yield b

            from rocketstore import MessageStore

            orig = (_writer._prepare, _writer._bad_statuses, _writer._StoreStats.add_batch)
            mt = (MessageStore.put_batch, MessageStore.flush, MessageStore.close)
            snap: dict[tuple[int, int], tuple[str, str, int]] = {}

            def before_close(store: Any) -> None:
                snap.update(_threads())
                c = t()
                mt[2](store)
                steps["close"] += t() - c

            patches = [
                (_writer, "_prepare", timed("prepare_batch (digest, queues)", orig[0])),
                (_writer, "_bad_statuses", timed("statuses + stats", orig[1])),
                (_writer._StoreStats, "add_batch", timed("statuses + stats", orig[2])),
                (MessageStore, "put_batch", timed("put_batch", mt[0])),
                (MessageStore, "flush", timed("flush", mt[1])),
                (MessageStore, "close", before_close),
            ]
            saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
            for obj, name, f in patches:
                setattr(obj, name, f)
            r0, c0, w0 = time.process_time(), t(), time.perf_counter()
            try:
                msg = super().write(batches())
            finally:
                for obj, name, f in saved:
                    setattr(obj, name, f)
            main = t() - c0
            steps["main thread, other"] = main - sum(steps.values())
            steps["main thread, total"] = main
            bg = {
                comm: ticks / _TICK
                for (pid, tid), (_, comm, ticks) in snap.items()
                if pid == os.getpid() and tid != pid and comm.startswith("rs")
            }
            for comm, s in bg.items():
                steps[f"thread {comm} (until close)"] = s
            steps["worker process total"] = time.process_time() - r0
            steps["wall"] = time.perf_counter() - w0
            line = {"rows": rows, **{k: round(v * 1e9 / max(rows, 1)) for k, v in steps.items()}}
            with open(os.environ["RS_WRITE_PROFILE"], "a") as fh:
                fh.write(json.dumps(line) + "\n")
            return msg

    class ProfiledSource(RocketStoreDataSource):
        @classmethod
        def name(cls) -> str:
            return "rs_profiled"

        def writer(self, schema: Any, overwrite: bool) -> Any:
            return ProfiledWriter(self.options, schema, overwrite)

    return ProfiledSource


def _fsync_tree(root: Path) -> None:
    """``fsync`` of every file under ``root``, then of every directory, deepest first."""
    walked = list(os.walk(root))
    files = [os.path.join(d, name) for d, _, names in walked for name in names]
    for path in files + [d for d, _, _ in reversed(walked)]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _durable_parquet(df: Any, p: Path) -> None:
    df.write.mode("overwrite").parquet(str(p))
    _fsync_tree(p)


def _writers(df: Any, fsize: str) -> dict[str, Any]:
    """Each variant's write of ``df`` into a path."""
    return {
        "parquet": lambda p: df.write.mode("overwrite").parquet(str(p)),
        # Parquet made as durable as a published store: its files and directories fsynced
        # after the write (Spark's file commit syncs nothing), timed with the write.
        "parquet_durable": lambda p: _durable_parquet(df, Path(p)),
        "noop": lambda p: df.write.format("rs_noop").mode("overwrite").save(str(p)),
        "noop_nogc": lambda p: (
            df.write.format("rs_noop").option("gc", "off").mode("overwrite").save(str(p))
        ),
        "rocketstore": lambda p: (
            df.write.format("rocketstore")
            .mode("overwrite")
            .option("mapped_file_size_commit_log", fsize)
            .save(str(p))
        ),
        # Bodies compressed as a RocketMQ producer does (any size), as Parquet compresses its
        # pages with snappy: LZ4 is the codec closest to snappy in speed.
        "rocketstore_lz4": lambda p: (
            df.write.format("rocketstore")
            .mode("overwrite")
            .option("mapped_file_size_commit_log", fsize)
            .option("compressionType", "lz4")
            .option("compressOver", "0")
            .save(str(p))
        ),
        "rocketstore_transient": lambda p: (
            df.write.format("rocketstore")
            .mode("overwrite")
            .option("mapped_file_size_commit_log", fsize)
            .option("transient_store_pool_enable", "true")
            .save(str(p))
        ),
        "rocketstore_pwrite": lambda p: (
            df.write.format("rocketstore")
            .mode("overwrite")
            .option("mapped_file_size_commit_log", fsize)
            .option("pwrite_commit_log", "true")
            .save(str(p))
        ),
        "rocketstore_mapping": lambda p: (
            df.write.format("rocketstore")
            .mode("overwrite")
            .option("mapped_file_size_commit_log", fsize)
            .option("pwrite_commit_log", "false")
            .save(str(p))
        ),
        "rocketstore_gc_on": lambda p: (
            df.write.format("rs_gc_on")
            .mode("overwrite")
            .option("mapped_file_size_commit_log", fsize)
            .save(str(p))
        ),
        "profiled": lambda p: (
            df.write.format("rs_profiled")
            .mode("overwrite")
            .option("mapped_file_size_commit_log", fsize)
            .save(str(p))
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--messages", type=int, default=0, help="default: as rocketstore bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir()))
    ap.add_argument("--only", default="parquet,noop,rocketstore", help="comma-separated")
    ap.add_argument("--profile", action="store_true", help="add the profiled rocketstore write")
    ap.add_argument("--threads", action="store_true", help="CPU per process and thread name")
    ap.add_argument("--conf", action="append", default=[], help="key=value Spark conf")
    ap.add_argument(
        "--bodies",
        choices=("filler", "random"),
        default="filler",
        help="filler: rocketstore bench's bodies (row number + a repeated alphabet, which "
        "Parquet's snappy compresses ~17x at 1 KiB); random: incompressible bytes",
    )
    ap.add_argument(
        "--partitions", type=int, default=2, help="partitions (tasks) of the DataFrame; default 2"
    )
    args = ap.parse_args()

    base = Path(args.dir) / "rocketstore-spark-write"
    base.mkdir(parents=True, exist_ok=True)
    profile_file = base / "profile.jsonl"
    os.environ["RS_WRITE_PROFILE"] = str(profile_file)  # inherited by the Python workers

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
    spark = bench_spark_session("rocketstore-spark-write")
    for kv in args.conf:
        k, v = kv.split("=", 1)
        spark.conf.set(k, v)
        print(f"conf {k}={v}", flush=True)
    import rocketstore.spark as rs_spark

    rs_spark.register(spark)
    spark.dataSource.register(NoopSource)
    if "rocketstore_gc_on" in args.only:
        spark.dataSource.register(_gc_on_source())
    names = [x for x in args.only.split(",") if x]
    if args.profile:
        spark.dataSource.register(_profiled_source())
        names.append("profiled")
    opts = BenchOptions()
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            n = args.messages or opts.messages_for(size)
            table = spark_input_table(bench_table(n, size))
            if args.bodies == "random":
                rng = random.Random(size)
                bodies = pa.array([rng.randbytes(size) for _ in range(n)], pa.binary())
                table = table.set_column(table.schema.get_field_index("body"), "body", bodies)
            print(f"{size:5d} B bodies: {args.bodies}", flush=True)
            df = spark.createDataFrame(table)
            df = df.repartition(args.partitions).cache()
            df.count()
            writers = _writers(df, str(opts.file_size))
            got: dict[str, list[tuple[float, float]]] = {x: [] for x in names}
            threads: dict[str, dict[tuple[str, str], float]] = {
                x: defaultdict(float) for x in names
            }
            for r in range(-1, args.rounds):  # round -1: warm-up, not counted
                for name in names:
                    p = base / f"{name}-{size}"
                    shutil.rmtree(p, ignore_errors=True)
                    if name == "profiled" and profile_file.exists():
                        profile_file.unlink()
                    s0 = _threads() if args.threads else {}
                    c0, t0 = _tree_cpu_seconds(), time.perf_counter()
                    writers[name](p)
                    wall, cpu = time.perf_counter() - t0, _tree_cpu_seconds() - c0
                    if args.threads:
                        for k, v in _delta(s0, _threads()).items():
                            if r >= 0:
                                threads[name][k] += v
                    shutil.rmtree(p, ignore_errors=True)
                    if r < 0:
                        continue
                    got[name].append((wall, cpu))
                    print(
                        f"{size:5d} B round {r} {name:12s} {n / wall:12,.0f} msg/s "
                        f"{cpu * 1e9 / n:8,.0f} CPU ns/msg  load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                    if name == "profiled" and profile_file.exists():
                        for line in profile_file.read_text().splitlines():
                            print(f"      task {line}", flush=True)
            for name in names:
                print(spark_median_line(got, name, size, n, 12), flush=True)
                if args.threads:
                    per = sorted(threads[name].items(), key=lambda kv: -kv[1])
                    rows = n * args.rounds
                    text = ", ".join(
                        f"{role}/{comm} {s * 1e9 / rows:,.0f}" for (role, comm), s in per[:12]
                    )
                    print(f"    threads (ns/msg): {text}", flush=True)
            df.unpersist()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
