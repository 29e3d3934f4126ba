"""Bulk jobs on Spark: :func:`ingest` a DataFrame into N stores, :func:`verify` a root.

``ingest`` repartitions a DataFrame so that each of ``stores`` Spark partitions holds whole
queues (rows with a ``queue_id`` go by topic and queue, rows without one by their keys) and
writes it through the ``rocketstore`` data source: one writer per store directory, published
atomically with a ``_SUCCESS`` manifest.

``verify`` checks a root (one store or a directory of stores) in parallel, one Spark task per
store, each opening its store read-only:

* ``crc``: every record's body CRC (``read_arrow(verify_crc=True)``);
* ``framing``: records are contiguous from the first offset to the end, recovery found no
  torn tail;
* ``consume_queue``: every consume queue unit is joined with its record on the commit log
  offset (size, topic, queue, queue offset, tags code) and every record has its unit;
* ``gap_free``: every queue's offsets are contiguous from its min to its max;
* ``index``: ``query_message`` finds every key's record (or a stated sample of keys);
* ``manifest``: the ``_SUCCESS`` manifest's counts, bytes, offsets, per-queue counts and body
  digest match what is on disk;
* ``source`` (given ``expected``): the stored messages equal the source DataFrame, compared
  both ways with multiplicity on topic, queue (if the source has ``queue_id``), keys, tags and
  the SHA-256 of the body.

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

import hashlib
import json
import os
import socket
import sys
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore._arrow import COLUMNS
from rocketstore.spark._report import CHECKS, MAX_EXAMPLES, Check, VerifyReport
from rocketstore.spark._writer import body_digest

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from rocketstore import MessageStore

__all__ = [
    "Check",
    "VerifyReport",
    "demo_messages",
    "ingest",
    "java_string_hash",
    "read_manifest",
    "verify",
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


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units), as a signed 32-bit int.

    RocketMQ's consume queue stores it (sign-extended) as the tags code.

    Example::

        assert java_string_hash("TagA") == 2598919
    """
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


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
# verify: one store (runs inside a Spark task, or anywhere)
# --------------------------------------------------------------------------------------


class _Scan:
    """The records of one store in commit log order (without bodies) and their digest."""

    def __init__(self) -> None:
        self.batches: list[Any] = []
        self.digest = 0
        self.count = 0
        self.end = 0
        self.bad_crc: set[int] = set()

    def add(self, batch: Any) -> None:
        if batch.num_rows == 0:
            return
        self.digest += body_digest(batch.column("body"))
        self.batches.append(batch.select(list(_RECORD_COLUMNS)))
        self.count += batch.num_rows

    def table(self) -> Any:
        pa = _arrow()[0]

        from rocketstore import MESSAGE_SCHEMA

        if not self.batches:
            schema = pa.schema([MESSAGE_SCHEMA.field(c) for c in _RECORD_COLUMNS])
            return schema.empty_table()
        return pa.Table.from_batches(self.batches)


def _file_size(files: Sequence[str], configured: int) -> int:
    """The commit log file size of a store, from its files (a read-only open may not know)."""
    starts = sorted(int(os.path.basename(f)) for f in files if os.path.basename(f).isdigit())
    if len(starts) >= 2:
        return starts[1] - starts[0]
    if files:
        try:
            return max(os.path.getsize(files[0]), 1)
        except OSError:
            pass
    return configured


def _file_of(offset: int, file_size: int) -> str:
    return f"{offset // file_size * file_size:020d}" if file_size > 0 else "?"


def _scan_store(
    store: MessageStore, name: str, *, lo: int, hi: int, file_size: int, checks: dict[str, Check]
) -> _Scan:
    """Reads every record with CRC checks; a bad record is counted and skipped."""
    from rocketstore.exceptions import CorruptionError, MessageStoreError

    crc, framing = checks["crc"], checks["framing"]
    scan = _Scan()
    off = lo
    while off < hi:
        try:
            batch, nxt = store.read_arrow(off, max_messages=_SCAN_BATCH, verify_crc=True)
        except CorruptionError as e:
            bad = getattr(e, "offset", None)
            if not isinstance(bad, int) or not off <= bad < hi:
                framing.fail(f"{name}: reading from commit log offset {off:,} failed: {e}")
                off = (off // file_size + 1) * file_size if file_size > 0 else hi
                continue
            if bad > off:  # the records before the bad one are fine
                batch, nxt = store.read_arrow(
                    off, max_messages=_SCAN_BATCH, end_offset=bad, verify_crc=True
                )
                if batch.num_rows == 0 or nxt <= off:
                    framing.fail(f"{name}: no record between offsets {off:,} and {bad:,}")
                    off = bad
                    continue
                scan.add(batch)
                off = nxt
                continue
            try:
                batch, nxt = store.read_arrow(bad, max_messages=1, verify_crc=False)
            except MessageStoreError as e2:
                framing.fail(f"{name}: record at commit log offset {bad:,} is unreadable: {e2}")
                off = (bad // file_size + 1) * file_size if file_size > 0 else hi
                continue
            where = f"commit log offset {bad:,} (file commitlog/{_file_of(bad, file_size)})"
            if batch.num_rows:
                row = batch.slice(0, 1).to_pylist()[0]
                where += f", {row['topic']} queue {row['queue_id']} offset {row['queue_offset']}"
            crc.fail(f"{name}: body CRC mismatch at {where}")
            scan.bad_crc.add(bad)
            scan.add(batch)
            off = nxt if nxt > off else hi
            continue
        except MessageStoreError as e:
            framing.fail(f"{name}: reading from commit log offset {off:,} failed: {e}")
            off = (off // file_size + 1) * file_size if file_size > 0 else hi
            continue
        if batch.num_rows == 0 or nxt <= off:
            break
        scan.add(batch)
        off = nxt
    scan.end = off
    crc.checked += scan.count
    return scan


def _check_framing(
    name: str,
    records: Any,
    *,
    lo: int,
    hi: int,
    scan_end: int,
    file_size: int,
    recovery: Mapping[str, Any],
    check: Check,
) -> None:
    import numpy as np

    check.checked += records.num_rows
    truncated = recovery.get("truncated_at")
    if truncated:
        at, reason = (truncated[0], truncated[1]) if len(truncated) > 1 else (truncated[0], "")
        check.fail(
            f"{name}: recovery found invalid data at commit log offset {at:,} "
            f"(file commitlog/{_file_of(int(at), file_size)}): {reason}; records after it are "
            "not reachable"
        )
    if scan_end < hi:
        check.fail(f"{name}: the scan stopped at offset {scan_end:,}, before the end {hi:,}")
    if records.num_rows == 0:
        return
    offs = records.column("commitlog_offset").to_numpy()
    sizes = records.column("store_size").to_numpy().astype(np.int64)
    if int(offs[0]) != lo:
        check.fail(f"{name}: the first record is at offset {int(offs[0]):,}, not at {lo:,}")
    ends = offs[:-1] + sizes[:-1]
    nxt = offs[1:]
    ok = nxt == ends
    if file_size > 0:
        # A record that did not fit went to the next file; a blank fills the gap.
        ok |= (nxt % file_size == 0) & (nxt > ends) & (nxt - ends <= file_size)
    bad = np.flatnonzero(~ok)
    for i in bad[:MAX_EXAMPLES]:
        check.fail(
            f"{name}: record at offset {int(offs[i]):,} (size {int(sizes[i])}) ends at "
            f"{int(ends[i]):,} but the next record is at {int(nxt[i]):,}"
        )
    if len(bad) > MAX_EXAMPLES:
        check.failed += len(bad) - MAX_EXAMPLES
    last_end = int(offs[-1]) + int(sizes[-1])
    if last_end != hi and scan_end >= hi:
        check.fail(f"{name}: the last record ends at {last_end:,}, the store ends at {hi:,}")


def _tags_codes(tags: Any) -> Any:
    """Expected CQ tags code of each record: Java hash of the tags, 0 without tags."""
    pa = _arrow()[0]

    encoded = tags.combine_chunks().dictionary_encode()
    values = encoded.dictionary.to_pylist()
    codes = pa.array([java_string_hash(v) if v else 0 for v in values] or [0], pa.int64())
    indices = encoded.indices.fill_null(len(values))
    codes = pa.concat_arrays([codes, pa.array([0], pa.int64())])
    return codes.take(indices)


def _read_units(
    store: MessageStore, queues: Sequence[tuple[str, int, int, int]], name: str, gap: Check
) -> Any:
    pa = _arrow()[0]

    parts: list[Any] = []
    for topic, qid, qmin, qmax in queues:
        q = qmin
        while q < qmax:
            b = store.read_consume_queue(topic, qid, q, max_units=65_536)
            if b.num_rows == 0:
                gap.fail(
                    f"{name}: {topic} queue {qid}: no consume queue unit at offset {q:,} "
                    f"(the queue claims {qmin:,}..{qmax - 1:,})"
                )
                break
            parts.append(b)
            last = int(b.column("queue_offset")[b.num_rows - 1].as_py())
            if last + 1 <= q:
                break
            q = last + 1
    if not parts:
        return pa.table(
            {
                "topic": pa.array([], pa.string()),
                "queue_id": pa.array([], pa.int32()),
                "queue_offset": pa.array([], pa.int64()),
                "commitlog_offset": pa.array([], pa.int64()),
                "size": pa.array([], pa.int32()),
                "tags_code": pa.array([], pa.int64()),
            }
        )
    return pa.Table.from_batches(parts).select(
        ["topic", "queue_id", "queue_offset", "commitlog_offset", "size", "tags_code"]
    )


def _check_consume_queue(name: str, records: Any, units: Any, check: Check) -> None:
    pa, pc = _arrow()

    # Only normal and committed-transaction records are dispatched to a consume queue.
    tx = pc.bit_wise_and(records.column("sys_flag"), pa.scalar(0x0C, pa.int32()))
    dispatched = records.filter(pc.or_(pc.equal(tx, 0), pc.equal(tx, 0x08)))
    rec = pa.table(
        {
            "commitlog_offset": dispatched.column("commitlog_offset"),
            "r_topic": dispatched.column("topic"),
            "r_queue_id": dispatched.column("queue_id"),
            "r_queue_offset": dispatched.column("queue_offset"),
            "r_size": dispatched.column("store_size"),
            "r_tags_code": _tags_codes(dispatched.column("tags")),
            "r_delay": pc.equal(dispatched.column("topic"), "SCHEDULE_TOPIC_XXXX"),
            "r_present": pa.repeat(pa.scalar(True), dispatched.num_rows),
        }
    )
    cq = pa.table(
        {
            "commitlog_offset": units.column("commitlog_offset"),
            "u_topic": units.column("topic"),
            "u_queue_id": units.column("queue_id"),
            "u_queue_offset": units.column("queue_offset"),
            "u_size": units.column("size"),
            "u_tags_code": units.column("tags_code"),
            "u_present": pa.repeat(pa.scalar(True), units.num_rows),
        }
    )
    check.checked += max(rec.num_rows, cq.num_rows)
    joined = rec.join(cq, keys="commitlog_offset", join_type="full outer")
    r_present = pc.fill_null(joined.column("r_present"), False)
    u_present = pc.fill_null(joined.column("u_present"), False)

    no_unit = joined.filter(pc.invert(u_present))
    for row in no_unit.slice(0, MAX_EXAMPLES).to_pylist():
        check.fail(
            f"{name}: {row['r_topic']} queue {row['r_queue_id']} offset {row['r_queue_offset']}: "
            f"the record at commit log offset {row['commitlog_offset']:,} has no consume "
            "queue unit"
        )
    check.failed += max(0, no_unit.num_rows - MAX_EXAMPLES)

    no_record = joined.filter(pc.invert(r_present))
    for row in no_record.slice(0, MAX_EXAMPLES).to_pylist():
        check.fail(
            f"{name}: {row['u_topic']} queue {row['u_queue_id']} offset {row['u_queue_offset']}: "
            f"the unit points at commit log offset {row['commitlog_offset']:,} "
            f"(size {row['u_size']}), where no record starts"
        )
    check.failed += max(0, no_record.num_rows - MAX_EXAMPLES)

    both = joined.filter(pc.and_(r_present, u_present))
    tags_ok = pc.or_(
        pc.equal(both.column("r_tags_code"), both.column("u_tags_code")), both.column("r_delay")
    )
    same = pc.and_(
        pc.and_(
            pc.equal(both.column("r_size"), both.column("u_size")),
            pc.equal(both.column("r_topic"), both.column("u_topic")),
        ),
        pc.and_(
            pc.and_(
                pc.equal(both.column("r_queue_id"), both.column("u_queue_id")),
                pc.equal(both.column("r_queue_offset"), both.column("u_queue_offset")),
            ),
            tags_ok,
        ),
    )
    differ = both.filter(pc.invert(pc.fill_null(same, False)))
    for row in differ.slice(0, MAX_EXAMPLES).to_pylist():
        diffs = [
            f"{what} {row['u_' + col]} != record's {row['r_' + col]}"
            for what, col in (
                ("size", "size"),
                ("topic", "topic"),
                ("queue", "queue_id"),
                ("queue offset", "queue_offset"),
                ("tags code", "tags_code"),
            )
            if row["u_" + col] != row["r_" + col]
        ]
        check.fail(
            f"{name}: {row['u_topic']} queue {row['u_queue_id']} offset {row['u_queue_offset']} "
            f"-> commit log offset {row['commitlog_offset']:,}: unit {', '.join(diffs)}"
        )
    check.failed += max(0, differ.num_rows - MAX_EXAMPLES)


def _queue_ranges(table: Any) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    """(topic, queue) -> (min, max, count, distinct) of the queue offsets in ``table``."""
    if table.num_rows == 0:
        return {}
    agg = table.group_by(["topic", "queue_id"]).aggregate(
        [
            ("queue_offset", "min"),
            ("queue_offset", "max"),
            ("queue_offset", "count"),
            ("queue_offset", "count_distinct"),
        ]
    )
    out: dict[tuple[str, int], tuple[int, int, int, int]] = {}
    for row in agg.to_pylist():
        out[(row["topic"], row["queue_id"])] = (
            row["queue_offset_min"],
            row["queue_offset_max"],
            row["queue_offset_count"],
            row["queue_offset_count_distinct"],
        )
    return out


def _first_gap(table: Any, topic: str, qid: int) -> int | None:
    import numpy as np

    pc = _arrow()[1]

    mask = pc.and_(pc.equal(table.column("topic"), topic), pc.equal(table.column("queue_id"), qid))
    offs = np.sort(table.filter(mask).column("queue_offset").to_numpy())
    steps = np.flatnonzero(np.diff(offs) != 1)
    return int(offs[steps[0]]) + 1 if len(steps) else None


def _check_gap_free(
    name: str,
    records: Any,
    units: Any,
    queues: Sequence[tuple[str, int, int, int]],
    check: Check,
) -> None:
    pc = _arrow()[1]

    tx = pc.bit_wise_and(records.column("sys_flag"), 0x0C)
    dispatched = records.filter(pc.or_(pc.equal(tx, 0), pc.equal(tx, 0x08)))
    by_unit = _queue_ranges(units)
    by_record = _queue_ranges(dispatched)
    for topic, qid, qmin, qmax in queues:
        check.checked += 1
        lo, hi, count, distinct = by_unit.get((topic, qid), (qmin, qmin - 1, 0, 0))
        expect = qmax - qmin
        if count != expect or distinct != count or (count and (lo != qmin or hi != qmax - 1)):
            gap = _first_gap(units, topic, qid)
            check.fail(
                f"{name}: {topic} queue {qid}: offsets {qmin:,}..{qmax - 1:,} should have "
                f"{expect:,} units, found {count:,} ({distinct:,} distinct"
                + (f", first gap at {gap:,}" if gap is not None else "")
                + ")"
            )
    for (topic, qid), (lo, hi, count, distinct) in sorted(by_record.items()):
        if (topic, qid) not in {(t, q) for t, q, _, _ in queues}:
            check.checked += 1
        if distinct != count or hi - lo + 1 != count:
            gap = _first_gap(dispatched, topic, qid)
            check.fail(
                f"{name}: {topic} queue {qid}: records carry queue offsets {lo:,}..{hi:,} "
                f"but there are {count:,} records ({distinct:,} distinct"
                + (f", first gap at {gap:,}" if gap is not None else "")
                + ")"
            )


def _check_index(
    store: MessageStore,
    name: str,
    records: Any,
    *,
    sample: int | None,
    check: Check,
    bad_crc: set[int] | None = None,
) -> None:
    import numpy as np

    pc = _arrow()[1]

    from rocketstore.exceptions import MessageStoreError

    has_key = pc.or_(
        pc.fill_null(pc.not_equal(records.column("keys"), ""), False),
        pc.is_valid(records.column("uniq_key")),
    )
    # Rolled-back transaction records are never indexed (spec 6.3).
    rollback = pc.equal(pc.bit_wise_and(records.column("sys_flag"), 0x0C), 0x0C)
    has_key = pc.and_(has_key, pc.invert(rollback))
    keyed = records.filter(has_key).select(["topic", "keys", "uniq_key", "commitlog_offset"])
    if sample is not None and keyed.num_rows > sample:
        idx = np.unique(np.linspace(0, keyed.num_rows - 1, num=max(sample, 1)).astype(np.int64))
        keyed = keyed.take(idx)
        check.note(f"a sample of up to {sample:,} keyed records per store")
    topics = keyed.column("topic").to_pylist()
    keys = keyed.column("keys").to_pylist()
    uniq = keyed.column("uniq_key").to_pylist()
    offsets = keyed.column("commitlog_offset").to_pylist()
    query = store.query_message
    for topic, ks, uk, off in zip(topics, keys, uniq, offsets, strict=True):
        tokens = [k for k in ks.split(" ") if k] if ks else []
        if uk:
            tokens.append(uk)
        if bad_crc and off in bad_crc:
            check.skipped += len(tokens)  # lookups skip records whose CRC fails
            continue
        for key in tokens:
            check.checked += 1
            try:
                hits = query(topic, key, max_num=_QUERY_MAX)
            except MessageStoreError as e:
                check.checked -= 1
                _index_unusable(store, name, e, check)
                return
            if any(m.commitlog_offset == off for m in hits):
                continue
            if len(hits) >= _QUERY_MAX:
                check.skipped += 1  # more messages share the key than one query returns
                continue
            check.fail(
                f"{name}: query_message({topic!r}, {key!r}) does not find the record at commit "
                f"log offset {off:,} ({len(hits)} other hit(s))"
            )


def _index_unusable(store: MessageStore, name: str, error: Exception, check: Check) -> None:
    """Records why no key could be looked up: no index at all, or one this open cannot use."""
    index_dir = Path(store.path) / "index"
    has_files = index_dir.is_dir() and any(index_dir.iterdir())
    if not has_files:
        check.note("a store has no index files (written with message_index_enable=false?)")
        return
    check.fail(
        f"{name}: query_message fails although index files exist: {error} (a store written "
        "with a non-default index size needs the same max_hash_slot_num and max_index_num "
        "to be read)"
    )


def _check_manifest(
    name: str,
    entry: Mapping[str, Any] | None,
    *,
    scan: _Scan,
    records: Any,
    hi: int,
    check: Check,
) -> None:
    pc = _arrow()[1]

    if entry is None:
        check.skipped += 1
        return
    counts: dict[str, dict[str, int]] = {}
    for (topic, qid), (_, _, count, _) in _queue_ranges(records).items():
        counts.setdefault(topic, {})[str(qid)] = count
    nbytes = int(pc.sum(records.column("store_size")).as_py() or 0) if records.num_rows else 0
    first = int(records.column("commitlog_offset")[0].as_py()) if records.num_rows else 0
    found: dict[str, Any] = {
        "messages": scan.count,
        "bytes": nbytes,
        "min_offset": first,
        "max_offset": hi,
        "queues": counts,
        "body_digest": str(scan.digest),
    }
    for key, value in found.items():
        check.checked += 1
        listed = entry.get(key)
        if key == "queues" and isinstance(listed, dict):
            listed = {str(t): {str(q): int(c) for q, c in qs.items()} for t, qs in listed.items()}
        elif key == "body_digest" and listed is not None:
            listed = str(listed)
        if listed != value:
            if key == "queues" and isinstance(listed, dict):
                diffs = [
                    f"{t} queue {q}: manifest {listed.get(t, {}).get(q, 0):,}, found "
                    f"{value.get(t, {}).get(q, 0):,}"
                    for t in sorted(set(listed) | set(value))
                    for q in sorted(set(listed.get(t, {})) | set(value.get(t, {})), key=int)
                    if listed.get(t, {}).get(q, 0) != value.get(t, {}).get(q, 0)
                ]
                check.fail(f"{name}: per-queue counts differ: " + "; ".join(diffs[:5]))
            else:
                check.fail(f"{name}: manifest says {key}={listed}, the store has {value}")


def _open_read_only(
    path: str | os.PathLike[str], config: Mapping[str, Any] | None
) -> tuple[MessageStore, bool]:
    """Opens a store read-only; returns ``(store, relaxed)``.

    Recovery refuses a body CRC mismatch below the durable offset; then the store is opened
    again with ``check_crc_on_recover=False`` (``relaxed``) so that the checks can find and
    report every bad record instead of failing on the first.
    """
    from rocketstore import MessageStore
    from rocketstore.exceptions import CorruptionError

    options = dict(config or {})
    try:
        return MessageStore(path, read_only=True, **options), False
    except CorruptionError as e:
        if "crc" not in str(e).lower() or "check_crc_on_recover" in options:
            raise
    return MessageStore(path, read_only=True, **options, check_crc_on_recover=False), True


def verify_store(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    manifest_entry: Mapping[str, Any] | None = None,
    sample_keys: int | None = None,
    config: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Check], dict[str, Any]]:
    """Runs the per-store checks on one store (opened read-only); no Spark needed.

    Returns ``(checks, stats)``: ``checks`` maps each of ``crc``, ``framing``,
    ``consume_queue``, ``gap_free``, ``index`` and ``manifest`` to a :class:`Check`;
    ``stats`` has ``messages``, ``bytes``, ``files``, ``min_offset``, ``max_offset`` and
    ``queues`` (``[topic, queue_id, messages, min_offset, max_offset]`` lists).
    ``manifest_entry`` is this store's entry in the ``_SUCCESS`` manifest (the check is
    skipped without one); ``sample_keys`` limits the index lookups to that many keyed
    records (evenly spread).

    Example::

        checks, stats = verify_store("/data/stores/store-00000")
        assert all(c.passed for c in checks.values())
    """
    pc = _arrow()[1]

    from rocketstore.exceptions import MessageStoreError

    label = name or os.fspath(path)
    checks = {n: Check(n) for n in STORE_CHECKS}
    stats: dict[str, Any] = {"messages": 0, "bytes": 0, "files": 0, "queues": []}
    try:
        store, relaxed = _open_read_only(path, config)
        if relaxed:
            checks["crc"].note("opened with check_crc_on_recover=false (recovery met a bad CRC)")
    except (MessageStoreError, OSError) as e:
        checks["framing"].fail(f"{label}: cannot open the store read-only: {e}")
        for c in checks.values():
            if c.name != "framing":
                c.ran = False
        return checks, stats
    with store:
        recovery = store.recovery_report
        files = store.commitlog_files()
        file_size = _file_size(files, int(store.config.get("mapped_file_size_commit_log", 0)))
        lo, hi = store.min_commitlog_offset(), store.max_commitlog_offset()
        stats.update(files=len(files), min_offset=lo, max_offset=hi)
        scan = _scan_store(store, label, lo=lo, hi=hi, file_size=file_size, checks=checks)
        records = scan.table()
        _check_framing(
            label,
            records,
            lo=lo,
            hi=hi,
            scan_end=scan.end,
            file_size=file_size,
            recovery=recovery,
            check=checks["framing"],
        )
        queues = store.consume_queues()
        units = _read_units(store, queues, label, checks["gap_free"])
        _check_consume_queue(label, records, units, checks["consume_queue"])
        _check_gap_free(label, records, units, queues, checks["gap_free"])
        _check_index(
            store, label, records, sample=sample_keys, check=checks["index"], bad_crc=scan.bad_crc
        )
        _check_manifest(
            label, manifest_entry, scan=scan, records=records, hi=hi, check=checks["manifest"]
        )
    per_queue = _queue_ranges(records)
    limits = {(t, q): (lo_, hi_) for t, q, lo_, hi_ in queues}
    stats["messages"] = scan.count
    stats["bytes"] = int(pc.sum(records.column("store_size")).as_py() or 0) if scan.count else 0
    stats["queues"] = [
        [t, q, per_queue.get((t, q), (0, 0, 0, 0))[2], *limits.get((t, q), (0, 0))]
        for t, q in sorted(set(per_queue) | set(limits))
    ]
    return checks, stats


def _verify_task(
    stores: Sequence[tuple[str, str, dict[str, Any] | None]],
    sample_keys: int | None,
    config: Mapping[str, Any],
) -> Any:
    """The mapInArrow function: each input row is the index of one store to verify."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        pa = _arrow()[0]

        for batch in batches:
            for i in batch.column(0).to_pylist():
                path, name, entry = stores[int(i)]
                t0 = time.perf_counter()
                checks, stats = verify_store(
                    path, name=name, manifest_entry=entry, sample_keys=sample_keys, config=config
                )
                stats["verified_by"] = {
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "python": sys.executable,
                    "seconds": round(time.perf_counter() - t0, 3),
                }
                rows: list[dict[str, Any]] = [
                    {
                        "store": name,
                        "check": c.name,
                        "checked": c.checked,
                        "failed": c.failed,
                        "skipped": c.skipped if c.ran else -1,
                        "examples": c.examples,
                        "notes": c.notes,
                        "detail": None,
                    }
                    for c in checks.values()
                ]
                rows.append(
                    {
                        "store": name,
                        "check": _STATS,
                        "checked": 0,
                        "failed": 0,
                        "skipped": 0,
                        "examples": [],
                        "notes": [],
                        "detail": json.dumps(stats),
                    }
                )
                yield pa.RecordBatch.from_pylist(
                    rows,
                    schema=pa.schema(
                        [
                            ("store", pa.string()),
                            ("check", pa.string()),
                            ("checked", pa.int64()),
                            ("failed", pa.int64()),
                            ("skipped", pa.int64()),
                            ("examples", pa.list_(pa.string())),
                            ("notes", pa.list_(pa.string())),
                            ("detail", pa.string()),
                        ]
                    ),
                )

    return run


# --------------------------------------------------------------------------------------
# verify: the source comparison (a Spark aggregation)
# --------------------------------------------------------------------------------------


def _normalized(df: DataFrame, with_queue: bool) -> DataFrame:
    """topic, [queue_id], keys, tags, body_sha256 with keys as one space-joined string."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    cols = set(df.columns)
    if "keys" in cols:
        keys = F.col("keys")
        if isinstance(df.schema["keys"].dataType, ArrayType):
            keys = F.array_join(F.filter(keys, lambda k: k != F.lit("")), " ")
        keys = F.when(keys == F.lit(""), F.lit(None)).otherwise(keys)
    else:
        keys = F.lit(None).cast("string")
    tags = (
        F.when(F.col("tags") == F.lit(""), F.lit(None)).otherwise(F.col("tags"))
        if "tags" in cols
        else F.lit(None).cast("string")
    )
    out = [F.col("topic").cast("string").alias("topic")]
    if with_queue:
        out.append(F.col("queue_id").cast("int").alias("queue_id"))
    out += [
        keys.cast("string").alias("keys"),
        tags.cast("string").alias("tags"),
        F.sha2(F.col("body").cast("binary"), 256).alias("body_sha256"),
    ]
    return df.select(*out)


def _describe_row(row: Mapping[str, Any], with_queue: bool) -> str:
    parts = [f"topic={row['topic']}"]
    if with_queue:
        parts.append(f"queue_id={row['queue_id']}")
    parts += [
        f"keys={row['keys']!r}",
        f"tags={row['tags']!r}",
        f"body sha256={str(row['body_sha256'])[:16]}...",
    ]
    return " ".join(parts)


_STORED_SCHEMA = (
    "topic string, queue_id int, keys string, tags string, body_sha256 string, store string"
)


def _stored_rows_task(
    stores: Sequence[tuple[str, str, dict[str, Any] | None]], config: Mapping[str, Any]
) -> Any:
    """mapInArrow function: every record of one store as (topic, queue, keys, tags, sha256).

    Reads with ``read_arrow`` and hashes in the task, so bodies never travel to the JVM.
    """

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        pa, pc = _arrow()
        from rocketstore.exceptions import MessageStoreError

        for batch in batches:
            for i in batch.column(0).to_pylist():
                path, name, _ = stores[int(i)]
                try:
                    store, _relaxed = _open_read_only(path, config)
                except (MessageStoreError, OSError):
                    continue  # the framing check reports it; its rows count as missing
                with store:
                    off, hi = store.min_commitlog_offset(), store.max_commitlog_offset()
                    while off < hi:
                        b, nxt = store.read_arrow(off, max_messages=_SCAN_BATCH)
                        if b.num_rows == 0 or nxt <= off:
                            break
                        off = nxt
                        yield pa.RecordBatch.from_arrays(
                            [
                                b.column("topic"),
                                b.column("queue_id"),
                                _empty_to_null(pc, b.column("keys")),
                                _empty_to_null(pc, b.column("tags")),
                                pa.array(_sha256_hex(b.column("body")), pa.string()),
                                pa.array([name] * b.num_rows, pa.string()),
                            ],
                            names=["topic", "queue_id", "keys", "tags", "body_sha256", "store"],
                        )

    return run


def _empty_to_null(pc: Any, column: Any) -> Any:
    return pc.if_else(pc.equal(column, ""), None, column)


def _sha256_hex(bodies: Any) -> list[str]:
    pa, pc = _arrow()
    array = pc.cast(bodies, pa.large_binary())
    n = len(array)
    if n == 0:
        return []
    _, offsets_buf, data_buf = array.buffers()
    offsets = memoryview(offsets_buf).cast("q")[array.offset : array.offset + n + 1]
    data = memoryview(data_buf) if data_buf is not None else memoryview(b"")
    sha256 = hashlib.sha256
    return [sha256(data[offsets[i] : offsets[i + 1]]).hexdigest() for i in range(n)]


def _compare_source(
    spark: SparkSession,
    stores: Sequence[tuple[str, str, dict[str, Any] | None]],
    expected: DataFrame,
    config: Mapping[str, Any],
) -> tuple[Check, int]:
    from pyspark.sql import functions as F

    check = Check("source")
    with_queue = "queue_id" in expected.columns
    if not with_queue:
        check.note("the source has no queue_id: queues are not compared")
    stored = spark.range(0, len(stores), 1, len(stores)).mapInArrow(
        _stored_rows_task(stores, config), _STORED_SCHEMA
    )
    src = _normalized(expected, with_queue)
    keys = list(src.columns)
    src = src.withColumn("side", F.lit(1)).withColumn("store", F.lit(None).cast("string"))
    got = stored.select(*keys, "store").withColumn("side", F.lit(-1))
    grouped = (
        src.unionByName(got)
        .groupBy(*keys)
        .agg(
            F.sum(F.when(F.col("side") == 1, 1).otherwise(0)).alias("n_source"),
            F.sum(F.when(F.col("side") == -1, 1).otherwise(0)).alias("n_stored"),
            F.first("store", ignorenulls=True).alias("store"),
        )
    )
    totals = grouped.agg(
        F.coalesce(F.sum("n_source"), F.lit(0)).alias("source"),
        F.coalesce(F.sum("n_stored"), F.lit(0)).alias("stored"),
        F.coalesce(
            F.sum(F.greatest(F.col("n_source") - F.col("n_stored"), F.lit(0))), F.lit(0)
        ).alias("missing"),
        F.coalesce(
            F.sum(F.greatest(F.col("n_stored") - F.col("n_source"), F.lit(0))), F.lit(0)
        ).alias("extra"),
    ).collect()[0]
    n_source, n_stored = int(totals["source"]), int(totals["stored"])
    missing, extra = int(totals["missing"]), int(totals["extra"])
    check.checked = max(n_source, n_stored)
    if missing or extra:
        check.failed = missing + extra
        check.note(
            f"source {n_source:,} rows, stores {n_stored:,} messages: {missing:,} source rows "
            f"missing from the stores, {extra:,} stored messages not in the source"
        )
        diff = grouped.where(F.col("n_source") != F.col("n_stored")).limit(MAX_EXAMPLES)
        for row in diff.collect():
            d = row.asDict()
            delta = int(d["n_source"]) - int(d["n_stored"])
            what = (
                f"in the source {d['n_source']}x but stored {d['n_stored']}x"
                if d["n_stored"]
                else f"missing from the stores ({delta}x)"
            )
            if delta < 0:
                what = (
                    f"stored {d['n_stored']}x but in the source {d['n_source']}x"
                    if d["n_source"]
                    else f"stored but not in the source ({-delta}x)"
                )
            if d.get("store"):
                what += f" (in {d['store']})"
            check.examples.append(f"{_describe_row(d, with_queue)}: {what}")
    return check, n_source


# --------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------


def verify(
    spark: SparkSession,
    root: str | os.PathLike[str],
    *,
    expected: DataFrame | None = None,
    sample_keys: int | None = None,
    report_path: str | os.PathLike[str] | None = None,
    **config: Any,
) -> VerifyReport:
    """Verifies every store under ``root`` (or ``root`` itself if it is a store).

    One Spark task per store opens it read-only and checks every record's CRC and framing,
    every consume queue unit against its record, every queue for gaps, an index lookup of
    every key (``sample_keys``: at most that many keyed records per store, evenly spread),
    and the store's entry in the ``_SUCCESS`` manifest. Given ``expected`` (the source
    DataFrame of an :func:`ingest`), a Spark aggregation also checks that the stored messages
    equal it, both ways and with multiplicity, on topic, queue (if ``expected`` has
    ``queue_id``), keys, tags and the SHA-256 of the body.

    ``config`` holds store configuration keywords for stores written with non-default
    geometry (e.g. ``max_hash_slot_num``). ``report_path`` writes the report as JSON plus a
    PNG plot (see :meth:`VerifyReport.write`).

    Returns a :class:`VerifyReport`: ``.ok``, ``.checks`` (name -> :class:`Check` with
    ``passed``, ``checked``, ``failed``, ``examples`` that say where), ``.to_dict()``,
    ``.df`` (the checks as a DataFrame) and ``str(report)`` (a table).

    Example::

        report = verify(spark, "/data/stores", expected=source_df, report_path="verify.json")
        print(report)
        if not report.ok:
            raise SystemExit(report.failed_checks)
    """
    _ensure_registered(spark)
    t0 = time.perf_counter()
    base = Path(os.path.abspath(os.fspath(root)))
    if not base.is_dir():
        raise FileNotFoundError(2, "no such directory to verify", str(base))
    found = _find_stores(base)
    if not found:
        raise FileNotFoundError(
            2, "no RocketMQ store (a directory with commitlog/) at or below", str(base)
        )
    manifest_root = base if (base / _MANIFEST).exists() or base not in found else base.parent
    manifest = read_manifest(manifest_root)
    entries: dict[str, dict[str, Any]] = {}
    checks = {name: Check(name) for name in CHECKS}
    if manifest is not None:
        for entry in manifest.get("stores", []):
            entries[str((manifest_root / str(entry.get("path"))).resolve())] = entry
    else:
        checks["manifest"].note("no _SUCCESS manifest (not written by the Spark writer)")

    stores = [(str(p), _store_name(base, p), entries.get(str(p.resolve()))) for p in found]
    rows = (
        spark.range(0, len(stores), 1, len(stores))
        .mapInArrow(_verify_task(stores, sample_keys, config), _TASK_SCHEMA)
        .collect()
    )

    store_info: list[dict[str, Any]] = []
    queues: list[dict[str, Any]] = []
    messages = 0
    for row in sorted(rows, key=lambda r: (r["store"], r["check"])):
        if row["check"] == _STATS:
            stats = json.loads(row["detail"])
            messages += int(stats["messages"])
            store_info.append(
                {
                    "name": row["store"],
                    "path": str(base / row["store"]) if row["store"] != "." else str(base),
                    **{k: v for k, v in stats.items() if k != "queues"},
                }
            )
            for topic, qid, count, qmin, qmax in stats["queues"]:
                queues.append(
                    {
                        "store": row["store"],
                        "topic": topic,
                        "queue_id": qid,
                        "messages": count,
                        "min_offset": qmin,
                        "max_offset": qmax,
                    }
                )
            continue
        part = Check(
            row["check"],
            checked=int(row["checked"]),
            failed=int(row["failed"]),
            skipped=max(0, int(row["skipped"])),
            examples=list(row["examples"] or []),
            notes=list(row["notes"] or []),
            ran=int(row["skipped"]) >= 0,
        )
        checks[row["check"]].merge(part)

    if manifest is None:  # nothing to compare with (a broker's store, say)
        checks["manifest"].ran = False
        checks["manifest"].skipped = 0
    # Stores the manifest lists but which are gone, or which exist but are not listed
    # (only when the whole root is verified, not one store of it).
    if manifest is not None and manifest_root == base:
        on_disk = {str(p.resolve()) for p in found}
        for key, entry in entries.items():
            checks["manifest"].checked += 1
            if key not in on_disk:
                checks["manifest"].fail(
                    f"the manifest lists {entry.get('path')!r}, which is not a store on disk"
                )
        listed = set(entries)
        for path, name, _ in stores:
            if str(Path(path).resolve()) not in listed:
                checks["manifest"].fail(f"{name}: a store on disk that the manifest does not list")
        totals = manifest.get("totals", {})
        if isinstance(totals, dict) and "messages" in totals:
            checks["manifest"].checked += 1
            listed_total = sum(int(e.get("messages", 0)) for e in entries.values())
            if int(totals["messages"]) != listed_total:
                checks["manifest"].fail(
                    f"the manifest's total ({totals['messages']:,}) is not the sum of its "
                    f"stores ({listed_total:,})"
                )

    source_rows: int | None = None
    if expected is not None:
        check, source_rows = _compare_source(spark, stores, expected, config)
        checks["source"] = check
    else:
        checks["source"].ran = False
        checks["source"].note("no expected DataFrame given")
    if sample_keys is None:
        checks["index"].note("every key")

    report = VerifyReport(
        root=str(base),
        checks=checks,
        stores=store_info,
        queues=queues,
        messages=messages,
        source_rows=source_rows,
        seconds=time.perf_counter() - t0,
        spark=spark,
    )
    if report_path is not None:
        report.write(report_path)
    return report


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
