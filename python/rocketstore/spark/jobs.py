"""Bulk jobs on Spark: :func:`ingest` a DataFrame into N stores, :func:`verify` a root.

``ingest`` repartitions a DataFrame so that each of ``stores`` Spark partitions holds whole
queues (rows with a ``queue_id`` go by topic and queue, rows without one by their keys) and
writes it through the ``rocketstore`` data source: one writer per store directory, published
atomically with a ``_SUCCESS`` manifest.

``verify`` checks a root (one store or a directory of stores) in parallel, one Spark task per
store running the native per-store checks; it lives in :mod:`rocketstore.spark.verify` and is
re-exported here.

Example::

    from rocketstore.spark import ingest, verify

    summary = ingest(df, "/data/stores", stores=8, mode="overwrite")
    print(summary["messages"], summary["messages_per_second"])
    report = verify(spark, "/data/stores", expected=df, report_path="/tmp/verify.json")
    print(report)
    assert report.ok, report.failed_checks

Stores are directories of memory-mapped files: ``root`` must be on a file system that every
executor sees at the same path (a local disk for ``local[*]``, a shared mount on a cluster).
"""

from __future__ import annotations

import json
import os
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore._arrow import COLUMNS
from rocketstore.spark._report import Check, VerifyReport
from rocketstore.spark.verify import verify, verify_local, verify_store

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


__all__ = [
    "Check",
    "VerifyReport",
    "demo_messages",
    "ingest",
    "read_manifest",
    "verify",
    "verify_local",
    "verify_store",
]

#: Columns ``put`` (and so the data source writer) accepts.
PUT_COLUMNS = COLUMNS
_MANIFEST = "_SUCCESS"
#: query_message returns at most this many messages per key (RocketMQ's maxMsgsNumBatch).
_QUERY_MAX = 64
_SCAN_BATCH = 32_768
_RECORD_COLUMNS = (
    "topic",
    "queue_id",
    "queue_offset",
    "commitlog_offset",
    "store_size",
    "sys_flag",
    "tags",
    "keys",
    "uniq_key",
)
_TASK_SCHEMA = (
    "store string, check string, checked long, failed long, skipped long, "
    "examples array<string>, notes array<string>, detail string"
)
_STATS = "__stats__"
#: Checks run inside the per-store tasks (``source`` runs as a Spark join on the driver).
STORE_CHECKS = ("crc", "framing", "consume_queue", "gap_free", "index", "manifest")


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------


def _arrow() -> tuple[Any, Any]:
    """pyarrow and pyarrow.compute, untyped (the stubs reject much valid compute code)."""
    import pyarrow
    import pyarrow.compute

    return pyarrow, pyarrow.compute


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


def read_manifest(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``_SUCCESS`` manifest the Spark writer left in ``root``, or None if there is none."""
    path = Path(root) / _MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a rocketstore manifest (not a JSON object)")
    return data


_REGISTERED: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def _ensure_registered(spark: SparkSession) -> None:
    """Registers the data source on ``spark`` once (registering again logs a warning)."""
    if spark in _REGISTERED:
        return
    from rocketstore.spark._source import register

    register(spark)
    _REGISTERED.add(spark)


def _find_stores(root: Path) -> list[Path]:
    from rocketstore.spark._stores import find_stores

    return find_stores(root)


def _store_name(root: Path, store: Path) -> str:
    return "." if store == root else store.relative_to(root).as_posix()


# --------------------------------------------------------------------------------------
# ingest
# --------------------------------------------------------------------------------------


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
    **options: Any,
) -> dict[str, Any]:
    """Writes ``df`` into ``stores`` new stores under ``root`` through the data source.

    ``df`` has ``put``'s columns (``topic`` and ``body`` required; ``queue_id``, ``tags``,
    ``keys``, ``properties``, ``born_timestamp``, ...). It is repartitioned into exactly
    ``stores`` Spark partitions, each written by one task into one store directory: rows
    with a ``queue_id`` are routed by topic and queue, so a queue lands in one store; rows
    without one are routed by their keys. ``order_by`` sorts rows within each store (for
    example by ``born_timestamp``) before they are appended; otherwise the order within a
    queue is the order the shuffle delivers.

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
    _ensure_registered(df.sparkSession)
    from pyspark.sql import functions as F

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
    writer = parts.write.format("rocketstore").mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    path = os.path.abspath(os.fspath(root))
    t0 = time.perf_counter()
    writer.save(path)
    seconds = time.perf_counter() - t0
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


# --------------------------------------------------------------------------------------
# Demo data
# --------------------------------------------------------------------------------------

#: Demo topics: (name, share in percent, tags).
DEMO_TOPICS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("orders", 35, ("created", "paid", "cancelled")),
    ("payments", 25, ("authorized", "captured", "refunded")),
    ("shipments", 15, ("packed", "shipped", "delivered")),
    ("user-events", 20, ("click", "view", "cart")),
    ("audit-log", 5, ()),
)


def demo_messages(
    spark: SparkSession,
    n: int = 1_000_000,
    *,
    queues: int = 8,
    body_size: int | None = None,
    partitions: int | None = None,
    start_ms: int = 1_700_000_000_000,
) -> DataFrame:
    """``n`` realistic messages as a DataFrame with ``put``'s columns, built by Spark itself.

    Five topics (``orders`` 35 %, ``payments`` 25 %, ``shipments`` 15 %, ``user-events``
    20 %, ``audit-log`` 5 %), ``queues`` queues each, three tags per topic (none for the
    audit log), keys (``ORD-<id>``; payments also carry their order's key; user events the
    user's key ``USR-<n>``; audit records none), properties on orders, born timestamps and
    hosts, and JSON bodies of mixed size (80 % 60-300 B, 18 % 300 B-1.1 KiB, 2 % 1-4 KiB),
    or exactly ``body_size`` bytes when given. Every value is a deterministic function of
    the row id (Spark's ``hash``), so the DataFrame is the same each time it is computed:
    it can be ingested and then passed to :func:`verify` as ``expected``.

    Example::

        df = demo_messages(spark, 100_000)
        ingest(df, "/tmp/demo", stores=4, mode="overwrite")
    """
    from pyspark.sql import functions as F

    ids = spark.range(0, n, 1, partitions) if partitions else spark.range(0, n)
    idc = F.col("id")

    def h(salt: int, mod: int) -> Column:
        return F.pmod(F.hash(idc, F.lit(salt)), F.lit(mod))

    pick = h(1, 100)
    topic_idx: Column = F.lit(len(DEMO_TOPICS) - 1)
    bound = 0
    whens: list[tuple[int, int]] = []
    for i, (_, share, _) in enumerate(DEMO_TOPICS):
        bound += share
        whens.append((bound, i))
    expr = None
    for b, i in whens[:-1]:
        expr = F.when(pick < b, F.lit(i)) if expr is None else expr.when(pick < b, F.lit(i))
    topic_idx = expr.otherwise(F.lit(whens[-1][1])) if expr is not None else topic_idx
    topics = F.array(*[F.lit(t) for t, _, _ in DEMO_TOPICS])
    topic = F.element_at(topics, topic_idx + 1)

    tag_pick = h(2, 3) + 1
    tags = None
    for i, (_, _, tag_names) in enumerate(DEMO_TOPICS):
        value = (
            F.element_at(F.array(*[F.lit(t) for t in tag_names]), tag_pick)
            if tag_names
            else F.lit(None).cast("string")
        )
        tags = F.when(topic_idx == i, value) if tags is None else tags.when(topic_idx == i, value)
    assert tags is not None

    sid = idc.cast("string")
    user = F.concat(F.lit("USR-"), h(3, 250_000).cast("string"))
    order_key = F.concat(F.lit("ORD-"), sid)
    keys = (
        F.when(topic_idx == 1, F.concat(F.lit("PAY-"), sid, F.lit(" "), order_key))
        .when(topic_idx == 3, user)
        .when(topic_idx == 4, F.lit(None).cast("string"))
        .otherwise(order_key)
    )
    ts_ms = F.lit(start_ms) + idc * F.lit(3)
    if body_size is None:
        size_class = h(5, 100)
        pad_len = (
            F.when(size_class < 80, h(6, 240))
            .when(size_class < 98, F.lit(240) + h(6, 800))
            .otherwise(F.lit(1000) + h(6, 3000))
        )
        frame = ids.withColumn("pad_len", pad_len)
        payload = F.expr(
            "substring(repeat(sha2(cast(id as string), 256), "
            "cast(ceil(pad_len / 64.0) as int)), 1, pad_len)"
        )
        body = F.concat(
            F.lit('{"id":'),
            sid,
            F.lit(',"topic":"'),
            topic,
            F.lit('","user":"'),
            user,
            F.lit('","amount":'),
            F.format_number(h(7, 100_000) / F.lit(100.0), 2),
            F.lit(',"ts":'),
            ts_ms.cast("string"),
            F.lit(',"payload":"'),
            payload,
            F.lit('"}'),
        )
    else:
        frame = ids
        filler = F.expr(f"repeat(sha2(cast(id as string), 256), {body_size // 64 + 1})")
        body = F.substring(F.concat(F.lit("msg-"), sid, F.lit("|"), filler), 1, body_size)
    channels = F.array(F.lit("web"), F.lit("app"), F.lit("partner"))
    properties = F.when(
        topic_idx == 0,
        F.create_map(
            F.lit("channel"),
            F.element_at(channels, h(8, 3) + 1),
            F.lit("region"),
            F.concat(F.lit("eu-"), h(9, 4).cast("string")),
        ),
    )
    born_host = F.concat(
        F.lit("10.1."),
        h(10, 16).cast("string"),
        F.lit("."),
        (h(11, 250) + 1).cast("string"),
        F.lit(":"),
        (F.lit(40000) + h(12, 20000)).cast("string"),
    )
    return frame.select(
        topic.alias("topic"),
        h(4, queues).cast("int").alias("queue_id"),
        tags.alias("tags"),
        keys.alias("keys"),
        body.cast("binary").alias("body"),
        properties.alias("properties"),
        F.timestamp_millis(ts_ms).alias("born_timestamp"),
        born_host.alias("born_host"),
    )
