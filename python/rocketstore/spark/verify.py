"""Verification of stores: :func:`verify_store` (one store, no Spark), :func:`verify` (a root,
one Spark task per store) and :func:`verify_local` (a root, no Spark).

The per-store checks run in one native call, :func:`rocketstore.verify_store`, over a read-only
open of the store (the interpreter released; no per-record Python):

* ``crc``: every record's body CRC;
* ``framing``: records are contiguous from the first offset to the end, recovery found no
  torn tail;
* ``consume_queue``: every consume queue unit is matched with its record on the commit log
  offset (size, topic, queue, queue offset, tags code) and every record has its unit;
* ``gap_free``: every queue's offsets are contiguous from its min to its max;
* ``index``: the index finds every key's record (or a stated sample of keys);
* ``manifest``: the ``_SUCCESS`` manifest's counts, bytes, offsets, per-queue counts and body
  digest match what is on disk;
* ``source`` (``verify`` given ``expected``): the stored messages equal the source DataFrame,
  with multiplicity, on topic, queue (if the source has ``queue_id``), keys, tags and body:
  per queue, the count and the sum of an xxhash64 digest of each message (the stores' side
  summed by the native checks in the same pass, the source's by one Spark aggregation, no
  join); if they differ, a row-by-row comparison (a Spark join) names the differing rows.

Example::

    from rocketstore.spark import verify

    report = verify(spark, "/data/stores", expected=df, report_path="/tmp/verify.json")
    assert report.ok, report.failed_checks
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore._remote import RemoteRoot, resolve_root, spark_settings, split_settings
from rocketstore._stores import MANIFEST, find_stores, read_manifest, store_key
from rocketstore.spark._options import GEOMETRY_FIELDS, check_geometry
from rocketstore.spark._report import CHECKS, MAX_EXAMPLES, Check, VerifyReport
from rocketstore.spark._sink_log import MARKER_TOPIC

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["STORE_CHECKS", "verify", "verify_local", "verify_store"]

_SCAN_BATCH = 32_768
_TASK_SCHEMA = (
    "store string, check string, checked long, failed long, skipped long, "
    "examples array<string>, notes array<string>, detail string"
)
_STATS = "__stats__"
#: Checks run per store (``source`` runs as a Spark join on the driver).
STORE_CHECKS = ("crc", "framing", "consume_queue", "gap_free", "index", "manifest")

#: A store to verify: (path, name in the report, its manifest entry or None).
_Store = tuple[str, str, dict[str, Any] | None]


def _arrow() -> tuple[Any, Any]:
    """pyarrow and pyarrow.compute, untyped (the stubs reject much valid compute code)."""
    import pyarrow
    import pyarrow.compute

    return pyarrow, pyarrow.compute


def _open_read_only(path: str | os.PathLike[str], config: Mapping[str, Any] | None) -> Any:
    """Opens a store read-only, relaxing the CRC check of recovery if that alone fails."""
    from rocketstore import MessageStore
    from rocketstore.exceptions import CorruptionError

    options = dict(config or {})
    try:
        return MessageStore(path, read_only=True, **options)
    except CorruptionError as e:
        if "crc" not in str(e).lower() or "check_crc_on_recover" in options:
            raise
    return MessageStore(path, read_only=True, **options, check_crc_on_recover=False)


# --------------------------------------------------------------------------------------
# One store (no Spark)
# --------------------------------------------------------------------------------------


def verify_store(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    manifest_entry: Mapping[str, Any] | None = None,
    sample_keys: int | None = None,
    config: Mapping[str, Any] | None = None,
    message_digest: bool | None = None,
) -> tuple[dict[str, Check], dict[str, Any]]:
    """Runs the per-store checks on one store (opened read-only); no Spark needed.

    A thin wrapper of the native :func:`rocketstore.verify_store` (one call, the interpreter
    released). Returns ``(checks, stats)``: ``checks`` maps each of ``crc``, ``framing``,
    ``consume_queue``, ``gap_free``, ``index`` and ``manifest`` to a :class:`Check`;
    ``stats`` has ``messages``, ``bytes``, ``files``, ``min_offset``, ``max_offset``,
    ``body_digest`` and ``queues`` (``[topic, queue_id, messages, min_offset, max_offset]``
    lists). ``manifest_entry`` is this store's entry in the ``_SUCCESS`` manifest (the check
    is skipped without one; its ``config`` is applied when the store is opened, under
    ``config``); ``sample_keys`` limits the index lookups to that many keyed
    records (evenly spread). With ``message_digest`` (True: with queue ids), ``stats`` also
    has ``message_digests``: ``[topic, queue_id, messages, digest sum as a decimal string]``
    per queue, for :func:`verify`'s comparison with the source.

    Example::

        checks, stats = verify_store("/data/stores/store-00000")
        assert all(c.passed for c in checks.values())
    """
    from rocketstore._native import verify_store as native_verify

    # The writer's configuration (index and consume queue geometry are not in the files),
    # then the caller's, which wins.
    options: dict[str, Any] = {}
    listed = (manifest_entry or {}).get("config")
    if isinstance(listed, Mapping):
        options.update(listed)
    options.update(config or {})
    # A stream sink's store: what readers see ends at its last committed micro-batch; a batch
    # being appended (or one that died half-way) is checked but not counted.
    committed_end, tail = _sink_committed_end(path, options)
    report = native_verify(
        os.fspath(path),
        name=name if name is not None else os.fspath(path),
        manifest_entry=dict(manifest_entry) if manifest_entry is not None else None,
        sample_keys=sample_keys,
        message_digest=message_digest,
        committed_end=committed_end,
        **options,
    )
    checks = {
        c.name: Check(
            c.name,
            checked=c.checked,
            failed=c.failed,
            skipped=c.skipped,
            examples=list(c.examples),
            notes=list(c.notes),
            ran=c.ran,
        )
        for c in report.checks
    }
    stats: dict[str, Any] = {
        "messages": report.messages,
        "bytes": report.bytes,
        "files": report.files,
        "min_offset": report.min_offset,
        "max_offset": report.max_offset,
        "body_digest": str(report.body_digest),
        "queues": [list(q) for q in report.queues],
    }
    if message_digest is not None:
        stats["message_digests"] = [[t, q, n, str(d)] for t, q, n, d in report.message_digests]
    if committed_end is not None:
        stats["committed_end"] = committed_end
        if tail:
            checks["framing"].note(
                f"{name if name is not None else os.fspath(path)}: {tail:,} bytes past the last "
                "committed micro-batch of the stream sink (checked, not counted: readers do not "
                "see them)"
            )
    return checks, stats


def _sink_committed_end(
    path: str | os.PathLike[str], config: Mapping[str, Any]
) -> tuple[int | None, int]:
    """For a stream sink's store: (the end of its last commit record, the bytes past it);
    (None, 0) for any other store (or one that does not open: the checks report that)."""
    from rocketstore.exceptions import MessageStoreError
    from rocketstore.spark._sink_log import is_sink_store, last_commit

    if not is_sink_store(Path(path)):
        return None, 0
    try:
        with _open_read_only(path, config) as store:
            commit = last_commit(store)
            end = commit.after if commit is not None else store.min_commitlog_offset()
            return end, max(0, store.max_commitlog_offset() - end)
    except (MessageStoreError, OSError):
        return None, 0


def _split_config(config: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """``(file system settings, store configuration)`` of ``verify``'s keywords: keys such
    as ``fs.s3a.endpoint`` (given as ``**{"fs.s3a.endpoint": ...}``) configure a remote root."""
    settings, rest = split_settings({k: str(v) for k, v in config.items()})
    return settings, {k: v for k, v in config.items() if k in rest}


def _local(path: str, entry: dict[str, Any] | None, remote: RemoteRoot | None) -> str:
    """The local path of a store to check: ``path`` itself, or for a remote root the
    executor's cached copy (downloaded, each file's size and SHA-256 checked against the
    manifest)."""
    if remote is None:
        return path
    return str(remote.fetch(entry or {"path": remote.rel_of(path)}))


def _store_rows(
    path: str,
    name: str,
    entry: dict[str, Any] | None,
    sample_keys: int | None,
    config: Any,
    *,
    message_digest: bool | None = None,
    remote: RemoteRoot | None = None,
) -> list[dict[str, Any]]:
    """The report rows of one store: one per check and one of statistics."""
    t0 = time.perf_counter()
    path = _local(path, entry, remote)
    checks, stats = verify_store(
        path,
        name=name,
        manifest_entry=entry,
        sample_keys=sample_keys,
        config=config,
        message_digest=message_digest,
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
    return rows


def _verify_task(
    stores: Sequence[_Store],
    sample_keys: int | None,
    config: Mapping[str, Any],
    message_digest: bool | None = None,
    remote: RemoteRoot | None = None,
) -> Any:
    """The mapInArrow function: each input row is the index of one store to verify."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        pa = _arrow()[0]
        schema = pa.schema(
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
        )
        for batch in batches:
            for i in batch.column(0).to_pylist():
                path, name, entry = stores[int(i)]
                rows = _store_rows(
                    path,
                    name,
                    entry,
                    sample_keys,
                    config,
                    message_digest=message_digest,
                    remote=remote,
                )
                yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return run


# --------------------------------------------------------------------------------------
# verify: the source comparison (a Spark aggregation)
# --------------------------------------------------------------------------------------


def _normalized(df: DataFrame, with_queue: bool, *, body_hash: bool = True) -> DataFrame:
    """topic, [queue_id], keys, tags, body_sha256 with keys as one space-joined string.

    With ``body_hash=False`` the last column is the ``body`` itself (as binary).
    """
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
        F.sha2(F.col("body").cast("binary"), 256).alias("body_sha256")
        if body_hash
        else F.col("body").cast("binary").alias("body"),
    ]
    return df.select(*out)


#: What a ``source`` check that passed on the digests says about how it compared.
_DIGEST_NOTE = "per queue: count and sum of xxhash64 digests of topic, queue, keys, tags, body"


def _source_digests(expected: DataFrame, with_queue: bool) -> dict[tuple[Any, ...], list[int]]:
    """(topic[, queue_id]) -> [rows, sum of message hashes] of the source, by one aggregation.

    The hash is Spark SQL's ``xxhash64(topic, [queue_id,] keys, tags, body)`` (a null key list
    or tag skipped, a null body hashed as an empty one), which the per-store checks compute
    over the stored records (``rocketstore::bulk::message_hash``) and sum per queue. Summed
    here as two ``long`` columns, the high and the low 32 bits of each hash, so that neither
    overflows.
    """
    from pyspark.sql import functions as F

    norm = _normalized(expected, with_queue, body_hash=False)
    group = ["topic", "queue_id"] if with_queue else ["topic"]
    h = F.xxhash64(*group, "keys", "tags", F.coalesce(F.col("body"), F.lit(b"")))
    rows = (
        norm.groupBy(*group)
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.shiftrightunsigned(h, 32)).alias("hi"),
            F.sum(h.bitwiseAND(F.lit(0xFFFFFFFF))).alias("lo"),
        )
        .collect()
    )
    return {
        tuple(r[g] for g in group): [int(r["n"]), (int(r["hi"] or 0) << 32) + int(r["lo"] or 0)]
        for r in rows
    }


def _stored_digests(
    rows: Sequence[Mapping[str, Any]], with_queue: bool
) -> dict[tuple[Any, ...], list[int]]:
    """The stores' per-queue message digests from the native checks' statistics rows."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for row in rows:
        if row["check"] != _STATS:
            continue
        for topic, qid, n, d in json.loads(row["detail"]).get("message_digests", []):
            if topic == MARKER_TOPIC:  # the stream sink's progress records: not source rows
                continue
            key = (topic, qid) if with_queue else (topic,)
            acc = out.setdefault(key, [0, 0])
            acc[0] += int(n)
            acc[1] += int(d)
    return {k: v for k, v in out.items() if v[0]}


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
    stores: Sequence[_Store], config: Mapping[str, Any], remote: RemoteRoot | None = None
) -> Any:
    """mapInArrow function: every record of one store as (topic, queue, keys, tags, sha256).

    Reads with ``read_arrow`` and hashes natively in the task (``body_sha256``), so bodies
    never travel to the JVM.
    """

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        pa, pc = _arrow()
        from rocketstore._native import body_sha256
        from rocketstore.exceptions import MessageStoreError
        from rocketstore.spark._sink_log import is_sink_store, last_commit

        for batch in batches:
            for i in batch.column(0).to_pylist():
                path, name, entry = stores[int(i)]
                try:
                    store = _open_read_only(_local(path, entry, remote), config)
                except (MessageStoreError, OSError):
                    continue  # the framing check reports it; its rows count as missing
                with store:
                    off, hi = store.min_commitlog_offset(), store.max_commitlog_offset()
                    if is_sink_store(Path(path)):  # up to its last committed micro-batch
                        commit = last_commit(store)
                        hi = min(hi, commit.after) if commit is not None else off
                    while off < hi:
                        b, nxt = store.read_arrow(off, max_messages=_SCAN_BATCH)
                        if b.num_rows == 0 or nxt <= off:
                            break
                        off = nxt
                        b = b.filter(pc.not_equal(b.column("topic"), MARKER_TOPIC))
                        yield pa.RecordBatch.from_arrays(
                            [
                                b.column("topic"),
                                b.column("queue_id"),
                                _empty_to_null(pc, b.column("keys")),
                                _empty_to_null(pc, b.column("tags")),
                                body_sha256(b.column("body"), b.column("sys_flag")),
                                pa.array([name] * b.num_rows, pa.string()),
                            ],
                            names=["topic", "queue_id", "keys", "tags", "body_sha256", "store"],
                        )

    return run


def _empty_to_null(pc: Any, column: Any) -> Any:
    return pc.if_else(pc.equal(column, ""), None, column)


def _compare_source(
    spark: SparkSession,
    stores: Sequence[_Store],
    expected: DataFrame,
    config: Mapping[str, Any],
    remote: RemoteRoot | None = None,
) -> tuple[Check, int]:
    from pyspark.sql import functions as F

    check = Check("source")
    with_queue = "queue_id" in expected.columns
    if not with_queue:
        check.note("the source has no queue_id: queues are not compared")
    stored = spark.range(0, len(stores), 1, len(stores)).mapInArrow(
        _stored_rows_task(stores, config, remote), _STORED_SCHEMA
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
# verify: a root
# --------------------------------------------------------------------------------------


class _Plan:
    """The stores under a root, their manifest entries and the report's checks."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        config: Mapping[str, Any],
        settings: Mapping[str, str] | None = None,
    ) -> None:
        local, self.remote = resolve_root(root, settings)
        self.entries: dict[str, dict[str, Any]] = {}
        self.source_rows: int | None = None
        self.checks = {name: Check(name) for name in CHECKS}
        if self.remote is not None:
            self._init_remote(self.remote)
            return
        base = Path(local)
        if not base.is_dir():
            raise FileNotFoundError(2, "no such directory to verify", str(base))
        found = find_stores(base)
        if not found:
            raise FileNotFoundError(
                2, "no RocketMQ store (a directory with commitlog/) at or below", str(base)
            )
        if any(k in config for k in GEOMETRY_FIELDS):  # refused before any task runs
            check_geometry(found, config, {k: str(v) for k, v in config.items()})
        manifest_root = base if (base / MANIFEST).exists() or base not in found else base.parent
        self.base = base
        self.found = found
        self.manifest_root = manifest_root
        self.manifest = read_manifest(manifest_root)
        if self.manifest is not None:
            for entry in self.manifest.get("stores", []):
                key = str((manifest_root / str(entry.get("path"))).resolve())
                self.entries[key] = entry
        else:
            self.checks["manifest"].note("no _SUCCESS manifest (not written by the Spark writer)")
        self.stores: list[_Store] = [
            (str(p), store_key(base, p), self.entries.get(str(p.resolve()))) for p in found
        ]

    def _init_remote(self, remote: RemoteRoot) -> None:
        """A remote root: the stores its newest manifest lists (a remote root is never
        listed); each task downloads its store and checks every file against the manifest."""
        from rocketstore.spark._reader import remote_entries

        self.base = Path(remote.uri)  # only for names in the report
        self.manifest_root = self.base
        self.found = []
        entries = remote_entries(remote)
        if not entries:
            raise FileNotFoundError(2, "the manifest of the remote root lists no store", remote.uri)
        _, self.manifest = remote.latest_manifest()
        self.stores = [(remote.child(str(e["path"])), str(e["path"]), e) for e in entries]
        self.checks["manifest"].note(
            f"remote root {remote.uri}: every listed file downloaded and matched with its "
            "size and SHA-256"
        )

    def report(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        sample_keys: int | None,
        t0: float,
        spark: SparkSession | None = None,
    ) -> VerifyReport:
        """Merges the per-store rows and the root-level manifest checks into the report."""
        checks, base, manifest = self.checks, self.base, self.manifest
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
                        "path": (
                            self.remote.child(row["store"])
                            if self.remote is not None
                            else str(base / row["store"])
                            if row["store"] != "."
                            else str(base)
                        ),
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
        if manifest is not None and self.manifest_root == base and self.remote is None:
            on_disk = {str(p.resolve()) for p in self.found}
            for key, entry in self.entries.items():
                checks["manifest"].checked += 1
                if key not in on_disk:
                    checks["manifest"].fail(
                        f"the manifest lists {entry.get('path')!r}, which is not a store on disk"
                    )
            listed = set(self.entries)
            for path, name, _ in self.stores:
                if str(Path(path).resolve()) not in listed:
                    checks["manifest"].fail(
                        f"{name}: a store on disk that the manifest does not list"
                    )
            totals = manifest.get("totals", {})
            if isinstance(totals, dict) and "messages" in totals:
                checks["manifest"].checked += 1
                listed_total = sum(int(e.get("messages", 0)) for e in self.entries.values())
                if int(totals["messages"]) != listed_total:
                    checks["manifest"].fail(
                        f"the manifest's total ({totals['messages']:,}) is not the sum of its "
                        f"stores ({listed_total:,})"
                    )
        if sample_keys is None:
            checks["index"].note("every key")
        return VerifyReport(
            root=self.remote.uri if self.remote is not None else str(base),
            checks=checks,
            stores=store_info,
            queues=queues,
            messages=messages,
            source_rows=self.source_rows,
            seconds=time.perf_counter() - t0,
            spark=spark,
        )


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

    One Spark task per store runs the native per-store checks (see the module docs): every
    record's CRC and framing, every consume queue unit against its record, every queue for
    gaps, an index lookup of every key (``sample_keys``: at most that many keyed records per
    store, evenly spread), and the store's entry in the ``_SUCCESS`` manifest. Given
    ``expected`` (the source DataFrame of an :func:`ingest`), it also checks that the stored
    messages equal it, with multiplicity, on topic, queue (if ``expected`` has ``queue_id``),
    keys, tags and body: per queue, the count and sum of an xxhash64 digest per message, the
    source's side by a Spark aggregation that runs while the per-store tasks run; only if they
    differ, a row-by-row Spark join names the differing rows.

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
    from rocketstore.spark._source import ensure_registered

    ensure_registered(spark)
    t0 = time.perf_counter()
    settings, config = _split_config(config)
    conf = spark_settings(spark)
    plan = _Plan(root, config, {**conf, **settings})
    stores = plan.stores
    with_queue = expected is not None and "queue_id" in expected.columns
    # The source's per-queue digests are aggregated by a second Spark job, in a thread, while
    # the per-store tasks run the native checks (which sum the same digests over the records).
    source: dict[str, Any] = {}
    thread: Any = None
    if expected is not None:
        from pyspark import InheritableThread

        def aggregate_source() -> None:
            try:
                source["sums"] = _source_digests(expected, with_queue)
            except BaseException as e:  # re-raised on the driver's thread below
                source["error"] = e

        thread = InheritableThread(target=aggregate_source, name="rocketstore-verify-source")
        thread.start()
    try:
        rows = (
            spark.range(0, len(stores), 1, len(stores))
            .mapInArrow(
                _verify_task(
                    stores,
                    sample_keys,
                    config,
                    with_queue if expected is not None else None,
                    plan.remote,
                ),
                _TASK_SCHEMA,
            )
            .collect()
        )
    finally:
        if thread is not None:
            thread.join()
    row_dicts = [r.asDict() for r in rows]
    if expected is not None:
        if "error" in source:
            raise source["error"]
        want, got = source["sums"], _stored_digests(row_dicts, with_queue)
        if want == got:
            check = Check("source")
            n_source = sum(n for n, _ in want.values())
            check.checked = n_source
            check.note(_DIGEST_NOTE)
            if not with_queue:
                check.note("the source has no queue_id: queues are not compared")
            plan.checks["source"], plan.source_rows = check, n_source
        else:  # find and name the differing rows
            plan.checks["source"], plan.source_rows = _compare_source(
                spark, stores, expected, config, plan.remote
            )
    else:
        plan.checks["source"].ran = False
        plan.checks["source"].note("no expected DataFrame given")
    report = plan.report(row_dicts, sample_keys=sample_keys, t0=t0, spark=spark)
    if report_path is not None:
        report.write(report_path)
    return report


def verify_local(
    root: str | os.PathLike[str],
    *,
    sample_keys: int | None = None,
    workers: int | None = None,
    report_path: str | os.PathLike[str] | None = None,
    **config: Any,
) -> VerifyReport:
    """:func:`verify` without Spark: the same per-store checks, stores in parallel threads.

    The native check releases the interpreter, so ``workers`` threads (default: the CPU
    count) verify that many stores at once. There is no ``source`` comparison (it needs the
    source DataFrame). ``rocketstore verify --no-spark ROOT`` runs this.

    Example::

        report = verify_local("/data/stores")
        assert report.ok, report.failed_checks
    """
    t0 = time.perf_counter()
    settings, config = _split_config(config)
    plan = _Plan(root, config, settings)
    n = max(1, min(len(plan.stores), workers or os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="rocketstore-verify") as pool:
        parts = pool.map(
            lambda s: _store_rows(s[0], s[1], s[2], sample_keys, config, remote=plan.remote),
            plan.stores,
        )
        rows = [row for part in parts for row in part]
    plan.checks["source"].ran = False
    plan.checks["source"].note("no expected DataFrame (verify without Spark)")
    report = plan.report(rows, sample_keys=sample_keys, t0=t0)
    if report_path is not None:
        report.write(report_path)
    return report
