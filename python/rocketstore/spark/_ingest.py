"""Bulk ingest on Spark: :func:`ingest` a DataFrame into N stores under a root.

``ingest`` repartitions a DataFrame so that each of ``stores`` Spark partitions holds whole
queues (rows with a ``queue_id`` go by topic and queue, rows without one by their keys) and
writes it through the ``rocketstore`` data source: one writer per store directory, published
atomically with a ``_SUCCESS`` manifest.

Example::

    from rocketstore.spark import ingest

    summary = ingest(df, "/data/stores", stores=8, mode="overwrite")
    print(summary["messages"], summary["messages_per_second"])

Stores are directories of memory-mapped files: a local ``root`` (a path or a ``file://`` URI)
must be on a file system that every executor sees at the same path (a local disk for
``local[*]``, a shared mount on a cluster). On a cluster without one, ``root`` is a remote URI
(``s3a://bucket/stores``, ``gs://``, ``abfss://``, ``hdfs://``): tasks build their stores on
local disk and upload them, and the session's ``spark.hadoop.fs.*`` settings apply (see
docs/spark.md, "Remote roots").
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rocketstore._arrow import COLUMNS
from rocketstore._stores import read_manifest
from rocketstore.spark._source import ensure_registered

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["PUT_COLUMNS", "ingest"]

#: Columns ``put`` (and so the data source writer) accepts.
PUT_COLUMNS = COLUMNS


def _murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of one int value (Murmur3_x86_32.hashInt with Spark's seed 42)."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = (value & mask) * 0xCC9E2D51 & mask
    k1 = rotl(k1, 15) * 0x1B873593 & mask
    h1 = seed ^ k1
    h1 = (rotl(h1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def _partition_keys(n: int) -> list[int]:
    """``keys[p]``: the smallest int that Spark's hash partitioning into ``n`` puts in ``p``."""
    keys: dict[int, int] = {}
    v = 0
    while len(keys) < n:
        keys.setdefault(_murmur3_int(v) % n, v)
        v += 1
    return [keys[p] for p in range(n)]


def _route(df: DataFrame, stores: int) -> Column:
    """Which of ``stores`` partitions each row goes to, as an int column in [0, stores).

    Rows with a ``queue_id`` go by ``(hash(topic) + queue_id) mod stores`` (every queue in
    one store, each topic's queues spread evenly); rows without by a hash of their keys (the
    writer's queue selector then keeps one key in one queue), else of topic and body.
    """
    from pyspark.sql import functions as F

    n = F.lit(stores)
    cols = set(df.columns)
    fallback = F.pmod(F.hash("topic", "body"), n)
    if "keys" in cols:
        fallback = F.when(F.col("keys").isNull(), fallback).otherwise(
            F.pmod(F.hash("topic", "keys"), n)
        )
    if "queue_id" not in cols:
        return fallback
    by_queue = F.pmod(F.hash("topic").cast("long") + F.col("queue_id").cast("long"), n)
    return F.when(F.col("queue_id").isNull(), fallback).otherwise(by_queue).cast("int")


def ingest(
    df: DataFrame,
    root: str | os.PathLike[str],
    *,
    stores: int = 4,
    mode: str = "append",
    order_by: str | Sequence[str] | None = None,
    partitioned: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Writes ``df`` into ``stores`` new stores under ``root`` through the data source.

    ``df`` has ``put``'s columns (``topic`` and ``body`` required; ``queue_id``, ``tags``,
    ``keys``, ``properties``, ``born_timestamp``, ...). It is repartitioned into exactly
    ``stores`` Spark partitions, each written by one task into one store directory: rows
    with a ``queue_id`` are routed by topic and queue, so a queue lands in one store; rows
    without one are routed by their keys. ``order_by`` sorts rows within each store (for
    example by ``born_timestamp``) before they are appended; otherwise the order within a
    queue is the order the shuffle delivers. ``partitioned=True`` skips the repartition (no
    shuffle): each Spark partition of ``df`` becomes one store as it is, for a DataFrame
    already laid out one partition per store with whole queues (as
    ``demo_messages(..., stores=N)`` makes it); ``stores`` is then not used.

    ``mode`` is ``"append"`` (add stores next to existing ones) or ``"overwrite"`` (replace
    every store under ``root``). ``options`` go to the writer: ``queueSelector``,
    ``queueNums`` and store configuration keywords such as
    ``mapped_file_size_commit_log=64 * 1024 * 1024``.

    Returns a summary: ``root``, ``stores`` (the new store paths, relative to ``root``),
    ``messages``, ``bytes`` (commit log bytes written), ``seconds``,
    ``messages_per_second``, ``mb_per_second`` and ``job_id``.

    Example::

        summary = ingest(df, "/data/stores", stores=8, mode="overwrite")
        print(f"{summary['messages']:,} messages at {summary['messages_per_second']:,.0f}/s")
    """
    if stores < 1:
        raise ValueError(f"stores must be at least 1, not {stores}")
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', not {mode!r}")
    ensure_registered(df.sparkSession)
    from pyspark.sql import functions as F

    if partitioned:
        parts = df
    else:
        route = _route(df, stores)
        keys = _partition_keys(stores)
        # Spark hash-partitions on pmod(hash(key), stores); keys[p] lands in partition p, so
        # store index p maps to partition p exactly (no two stores share a task).
        target = F.element_at(F.array(*[F.lit(k) for k in keys]), route + F.lit(1))
        parts = df.repartition(stores, target)
    if order_by:
        parts = parts.sortWithinPartitions(
            *([order_by] if isinstance(order_by, str) else list(order_by))
        )
    from rocketstore._remote import resolve_root, spark_settings

    path, remote = resolve_root(root)  # an unsupported scheme fails here, before any job
    if remote is not None:  # the session's spark.hadoop.fs.* settings, unless options set them
        given = {k.lower() for k in options}
        conf = spark_settings(df.sparkSession)
        options = {**{k: v for k, v in conf.items() if k not in given}, **options}
    writer = parts.write.format("rocketstore").mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    t0 = time.perf_counter()
    writer.save(path)
    seconds = time.perf_counter() - t0
    if remote is not None:
        _, remote = resolve_root(path, {k: str(v) for k, v in options.items()})
        assert remote is not None
        manifest = remote.latest_manifest()[1] or {}
    else:
        manifest = read_manifest(path) or {}
    job_id = manifest.get("job_id")
    new = [s for s in manifest.get("stores", []) if s.get("job_id") == job_id]
    messages = sum(int(s.get("messages", 0)) for s in new)
    nbytes = sum(int(s.get("bytes", 0)) for s in new)
    return {
        "root": path,
        "stores": [str(s["path"]) for s in new],
        "messages": messages,
        "bytes": nbytes,
        "seconds": seconds,
        "messages_per_second": messages / seconds if seconds > 0 else 0.0,
        "mb_per_second": nbytes / seconds / 1e6 if seconds > 0 else 0.0,
        "job_id": job_id,
        "mode": mode,
    }
