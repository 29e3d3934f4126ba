"""The streaming sink of the ``rocketstore`` data source: micro-batches appended to long-lived
stores, exactly once.

``df.writeStream.format("rocketstore").option("checkpointLocation", ckpt).start(root)`` appends
every micro-batch into a fixed set of stores, ``<root>/store-00000`` ..
``<root>/store-<stores - 1>`` (option ``stores``, default 4), each a RocketMQ store a broker can
load, growing as the query runs. ``<root>/_rocketstore_sink.json`` records the number of stores
and the store configuration; a restart with another ``stores`` value is refused.

Protocol (``_sink_log`` describes the records):

1. Task ``p`` of micro-batch ``b`` appends its rows to store ``(p + b) % stores`` (tasks of one
   batch that share a store take turns: a store has one writer at a time, by its lock). Holding
   the lock, it reads the store's last commit record and the task records after it:

   * batch ``b`` of this query is committed there already (a batch replayed after the driver
     died between committing the stores and recording the batch in the checkpoint): it writes
     nothing;
   * an earlier attempt of this very task (same query, run and batch) wrote its rows and its
     task record: it writes nothing;
   * anything past the last record it may keep (the commit record, then the task records of the
     same query, run and batch) was left by an attempt that died or by a run that did not
     commit: the store is cut back there (``rocketstore.truncate_store``) first.

   Then it appends its rows and a task record, flushes (rows and record are durable together)
   and closes the store.
2. The driver's ``commit`` appends to every store the batch touched a commit record (query id,
   batch id, the end offset, every queue's next offset, the last batch of every query that
   wrote the store), after checking that every task's record is there and cutting away anything
   past the last one; then it flushes, copies the record into the store's
   ``rocketstore_sink_commit.json`` (what survives if cleanup ever deletes the record's file),
   runs a cleanup pass (expired commit log files, see ``fileReservedTime``) and closes the
   store. A store whose commit record already names the
   batch is left alone, so a replayed commit writes nothing twice.

Readers (``spark.read`` / ``spark.readStream`` of ``format("rocketstore")``) read a sink's store
only up to its last commit record: rows of a batch being appended, or of one that died half-way,
are never seen, and the sink's own topic is hidden.

Options: ``stores``; ``lockTimeoutMs`` (default 600000: how long a task waits for a store another
task of the same batch holds); the batch writer's ``queueSelector``, ``queueNums``,
``compressionType``, ``compressLevel``, ``compressOver``; any store configuration keyword (e.g.
``fileReservedTime``, ``mappedFileSizeCommitLog``).

On a remote root (``s3a://...``, see :mod:`rocketstore._remote`) objects cannot be appended to,
so each micro-batch is committed as a batch job of its own: task ``p`` builds a new store from
its rows on the executor's local disk and uploads it below
``_temporary/stream-<query id>/<batch id>/<run id>/`` (:meth:`RocketStoreWriter._write`); the
driver's ``commit`` publishes the batch's stores with one new manifest
(:meth:`RocketStoreWriter._commit_remote`), which records the query id and batch id in the
manifest's ``streams``. A batch the newest manifest already records (replayed after the driver
died between creating the manifest and recording the batch in the checkpoint) is not published
again and its uploads are removed. Readers see a micro-batch when its manifest exists, all of
it. Option ``stores`` does not apply (each batch publishes one store per task that had rows).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from rocketstore._stores import TEMPORARY, find_stores
from rocketstore.exceptions import CommitConflictError, InvalidConfigError, StoreLockedError
from rocketstore.spark._heap import freeze_worker_heap
from rocketstore.spark._options import GEOMETRY_FIELDS, normalize, option_spelling, parse_int
from rocketstore.spark._sink_log import (
    Commit,
    TaskRecord,
    last_commit,
    put_commit,
    put_task,
    save_commit,
    tasks_since,
)
from rocketstore.spark._writer import (
    RocketStoreWriter,
    StoreCommitMessage,
    _bad_statuses,
    _fsync_dir,
    _prepare,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from rocketstore import MessageStore

__all__ = [
    "SINK_METADATA",
    "RocketStoreStreamWriter",
    "SinkTaskMessage",
    "SinkUploadMessage",
    "sink_config",
    "store_name",
    "stream_uploads",
]

#: The sink's metadata file in its root (JSON).
SINK_METADATA = "_rocketstore_sink.json"
#: Environment variable of the sink's failure injection, for tests (see ``_failpoint``).
FAILPOINT_ENV = "ROCKETSTORE_SINK_FAILPOINT"
#: File the ``pause`` mode of ``FAILPOINT_ENV`` creates when it pauses.
FAILPOINT_SIGNAL_ENV = "ROCKETSTORE_SINK_FAILPOINT_SIGNAL"

#: Options of the streaming sink that are not the batch writer's.
_SINK_OPTIONS = ("stores", "locktimeoutms", "checkpointlocation", "queryname")
#: How many times a remote root's micro-batch commit is tried when another job created the
#: same manifest first (each try reads the newest manifest again).
_REMOTE_COMMIT_TRIES = 5


def store_name(index: int) -> str:
    """The directory name of store ``index`` of a sink root, e.g. ``store-00003``."""
    return f"store-{index:05d}"


def sink_config(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The sink metadata of ``root`` (``stores``, ``config``), or None if it is not a sink root."""
    try:
        data = json.loads((Path(root) / SINK_METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class SinkTaskMessage(WriterCommitMessage):
    """What a sink task reports to the driver."""

    query: str
    run: str
    batch: int
    partition: int
    store: int
    messages: int  # rows this task stored (or an earlier attempt of it did)
    skipped: str | None  # why nothing was appended: "committed", "written" or None


@dataclass(frozen=True)
class SinkUploadMessage(WriterCommitMessage):
    """What a sink task on a remote root reports: the store it uploaded (``upload.path`` is
    None when the task had no rows)."""

    query: str
    run: str
    batch: int
    upload: StoreCommitMessage


def stream_uploads(query: str, batch: int, run: str | None = None) -> str:
    """Where the tasks of micro-batch ``batch`` of query ``query`` upload below a remote root
    (``run``: the directory of one run of the query), e.g. ``_temporary/stream-<id>/7``."""
    base = f"{TEMPORARY}/stream-{query}/{batch}"
    return f"{base}/{run}" if run is not None else base


def _stream_identity() -> tuple[str, str, int, int, int]:
    """(query id, run id, batch id, partition, attempt number) of the running sink task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("rocketstore stream sink: write() runs only in a Spark task")
    query = ctx.getLocalProperty("sql.streaming.queryId")
    run = ctx.getLocalProperty("spark.jobGroup.id")
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    if not query or not run or batch is None:
        raise RuntimeError(
            "rocketstore stream sink: the task has no streaming query id, run id or batch id "
            "(Spark sets them for micro-batch queries; continuous processing is not supported)"
        )
    return query, run, int(batch), ctx.partitionId(), ctx.attemptNumber()


def _failpoint(site: str, batch: int, key: int) -> tuple[int, str] | None:
    """The injected failure (``FAILPOINT_ENV``) for ``site`` of ``batch`` and ``key`` (a task's
    partition, a commit's store index), as ``(rows, mode)``, if one is configured.

    The variable holds ``;``-separated ``<site>:<batch>:<key>:<rows>:<mode>`` entries; ``site``
    is ``task`` (after ``rows`` rows of the first attempt of the task; local roots) or
    ``commit`` (before the driver commits that store; on a remote root key 0, before it
    publishes the batch); ``mode`` is ``raise``, ``exit`` (the process ends at once,
    as a killed executor or driver) or ``pause`` (the file named by ``FAILPOINT_SIGNAL_ENV`` is
    created, then the thread sleeps until the process is killed).
    """
    for entry in os.environ.get(FAILPOINT_ENV, "").split(";"):
        parts = entry.strip().split(":")
        if len(parts) != 5 or parts[0] != site:
            continue
        with contextlib.suppress(ValueError):
            if int(parts[1]) == batch and int(parts[2]) == key:
                return int(parts[3]), parts[4]
    return None


def _fail(mode: str, what: str) -> None:
    if mode == "exit":
        os._exit(17)  # as a killed process: no close, no cleanup
    if mode == "pause":
        signal = os.environ.get(FAILPOINT_SIGNAL_ENV)
        if signal:
            Path(signal).write_text(what, encoding="utf-8")
        time.sleep(3600)
    raise RuntimeError(f"rocketstore stream sink: injected failure ({FAILPOINT_ENV}): {what}")


class RocketStoreStreamWriter(DataSourceStreamArrowWriter):
    """Appends each micro-batch to a fixed set of stores under the root, exactly once.

    Created on the driver by ``df.writeStream.format("rocketstore")`` (see the module docs).

    Example::

        (
            events.writeStream.format("rocketstore")
            .option("checkpointLocation", "/data/ckpt")
            .option("stores", 4)
            .option("fileReservedTime", 48)  # hours a commit log file is kept
            .start("/data/stores")
        )
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        own = {normalize(k): v for k, v in options.items() if normalize(k) in _SINK_OPTIONS}
        rest = {k: v for k, v in options.items() if normalize(k) not in _SINK_OPTIONS}
        if "streamid" in {normalize(k) for k in rest}:
            err = InvalidConfigError(
                "option 'streamId' is gone: the sink appends every micro-batch to the stores "
                "under its root (option 'stores'); give each query its own root"
            )
            err.key = "streamId"
            raise err
        given = set(rest)
        self.writer = RocketStoreWriter(rest, schema, overwrite=False, live_marker=False)
        self._given = {f for f in GEOMETRY_FIELDS if option_spelling(rest, f) in given}
        self.lock_timeout_ms = parse_int(
            "lockTimeoutMs", own.get("locktimeoutms", "600000"), minimum=0
        )
        if self.writer.remote is not None:
            if "stores" in own:
                err = InvalidConfigError(
                    f"option 'stores' fixes the long-lived stores of a local sink root; on "
                    f"{self.root} every micro-batch publishes new stores (one per task with "
                    "rows): leave the option out"
                )
                err.key = "stores"
                raise err
            self.stores = 0
            return
        self.stores = parse_int("stores", own.get("stores", "4"), minimum=1)
        if self.stores > 10_000:
            err = InvalidConfigError(f"option 'stores' must be 1-10000, not {self.stores}")
            err.key = "stores"
            raise err
        self._init_root(rest)

    @property
    def root(self) -> str:
        """The sink root."""
        return self.writer.root

    def _init_root(self, rest_options: Mapping[str, str]) -> None:
        """Creates the sink metadata, or checks the root's against the options (driver side)."""
        root = Path(self.root)
        recorded = sink_config(root)
        if recorded is not None:
            if int(recorded.get("stores", -1)) != self.stores:
                err = InvalidConfigError(
                    f"option 'stores' is {self.stores} but the sink root {root} holds "
                    f"{recorded.get('stores')} stores (see {SINK_METADATA}); rows of a replayed "
                    "micro-batch must go to the stores they went to before"
                )
                err.key = "stores"
                raise err
            self._take_recorded_geometry(recorded, rest_options)
            return
        if root.is_dir() and find_stores(root):
            err = InvalidConfigError(
                f"{root} already holds stores that the stream sink did not write (no "
                f"{SINK_METADATA}); write the stream to a new directory"
            )
            err.key = "path"
            raise err
        root.mkdir(parents=True, exist_ok=True)
        meta = {
            "format": "rocketstore-stream-sink",
            "version": 1,
            "stores": self.stores,
            "config": dict(sorted(self.writer.config.items())),
        }
        tmp = root / f".{SINK_METADATA}.{os.getpid()}.tmp"
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, root / SINK_METADATA)
        _fsync_dir(root)

    def _take_recorded_geometry(
        self, recorded: Mapping[str, Any], options: Mapping[str, str]
    ) -> None:
        """The geometry the root's metadata records, for stores no batch has created yet; a
        geometry option that contradicts it is refused (the stores' files, if any, were
        checked by the batch writer's ``_take_geometry``)."""
        config = recorded.get("config")
        if not isinstance(config, dict):
            return
        for key in GEOMETRY_FIELDS:
            value = config.get(key)
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            given = self.writer.config.get(key)
            if given is None:
                self.writer.config[key] = value
            elif given != value and key in self._given:
                spelled = option_spelling(options, key)
                err = InvalidConfigError(
                    f"option {spelled}={given} contradicts the sink root {self.root}: its "
                    f"stores are made with {key}={value} (see {SINK_METADATA}); leave the "
                    "option out (the root's own value is used)"
                )
                err.key = spelled
                raise err

    def store_path(self, index: int) -> Path:
        """The directory of store ``index``."""
        return Path(self.root) / store_name(index)

    # ---- opening a store ----------------------------------------------------------------

    def _open(self, path: Path, truncate_to: int | None = None) -> MessageStore:
        """Opens a store for writing (cut back to ``truncate_to`` first, if given), waiting
        while another writer holds it."""
        from rocketstore import MessageStore, truncate_store

        config: dict[str, Any] = dict(self.writer.config)
        config.setdefault("populate_mapped_file", False)
        config.setdefault("pwrite_commit_log", True)
        deadline = time.monotonic() + self.lock_timeout_ms / 1000
        delay = 0.01
        while True:
            try:
                if truncate_to is not None:
                    truncate_store(path, truncate_to, **config)
                    truncate_to = None
                return MessageStore(path, **config)
            except StoreLockedError as e:
                if time.monotonic() >= deadline:
                    e.add_note(
                        f"rocketstore stream sink: {path} stayed locked for {self.lock_timeout_ms}"
                        " ms (option lockTimeoutMs); is another query writing to this root?"
                    )
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.25)

    @staticmethod
    def _kept(
        store: MessageStore, query: str, run: str, batch: int
    ) -> tuple[Commit | None, int, list[TaskRecord]]:
        """The last commit, the end of what may be kept, and this batch attempt's task records.

        Kept: everything up to the last commit record, then the task records of this query, run
        and batch that follow it without a gap of records of any other attempt.
        """
        commit = last_commit(store)
        first = store.min_commitlog_offset()
        # Past a commit whose own file cleanup deleted (its copy in COMMIT_FILE answered), all
        # that is left is uncommitted: kept from the first record on, it is cut below.
        keep = max(commit.after, first) if commit is not None else first
        ours: list[TaskRecord] = []
        for t in tasks_since(store, keep):
            if (t.query, t.run, t.batch) != (query, run, batch):
                break
            ours.append(t)
            keep = t.after
        return commit, keep, ours

    def _cut_to(self, store: MessageStore, path: Path, keep: int) -> MessageStore:
        """``store`` reopened with everything past ``keep`` cut away (or as is)."""
        if store.max_commitlog_offset() <= keep:
            return store
        store.close()
        return self._open(path, truncate_to=keep)

    # ---- executor side ----------------------------------------------------------------

    def write(  # type: ignore[override]
        self, iterator: Iterator[pa.RecordBatch]
    ) -> SinkTaskMessage | SinkUploadMessage:
        """Appends this task's rows to its store, unless they are there already; on a remote
        root, writes them into a new store and uploads it."""
        freeze_worker_heap()
        query, run, batch, partition, attempt = _stream_identity()
        if self.writer.remote is not None:
            upload = self.writer._write(iterator, upload_dir=stream_uploads(query, batch, run))
            return SinkUploadMessage(query, run, batch, upload)
        index = (partition + batch) % self.stores
        batches = (b for b in iterator if b.num_rows > 0)
        first = next(batches, None)
        if first is None:
            return SinkTaskMessage(query, run, batch, partition, index, 0, None)
        path = self.store_path(index)
        store = self._open(path)
        try:
            commit, keep, ours = self._kept(store, query, run, batch)
            if commit is not None and commit.committed(query, batch):
                return SinkTaskMessage(query, run, batch, partition, index, 0, "committed")
            done = [t for t in ours if t.partition == partition]
            if done:
                return SinkTaskMessage(
                    query, run, batch, partition, index, done[0].messages, "written"
                )
            store = self._cut_to(store, path, keep)
            rows = self._append(store, _chain(first, batches), (partition, batch, attempt))
            put_task(
                store,
                query=query,
                run=run,
                batch=batch,
                partition=partition,
                attempt=attempt,
                messages=rows,
            )
            store.flush()
        finally:
            store.close()
        return SinkTaskMessage(query, run, batch, partition, index, rows, None)

    def _append(
        self,
        store: MessageStore,
        batches: Iterator[pa.RecordBatch],
        task: tuple[int, int, int],
    ) -> int:
        """Puts the task's rows; returns how many. ``task``: (partition, batch id, attempt)."""
        partition, batch_id, attempt = task
        w = self.writer
        counter = partition % w.queue_nums
        row = 0
        fail = _failpoint("task", batch_id, partition) if attempt == 0 else None
        for batch in batches:
            table, _digest, counter = _prepare(batch, w.selector, w.queue_nums, counter)
            if fail is not None and row + table.num_rows > fail[0]:
                table = table.slice(0, max(0, fail[0] - row))
            try:
                results = store.put_batch(table, **w.compress)
            except Exception as e:
                e.add_note(
                    f"rocketstore stream sink: Spark partition {partition} of micro-batch "
                    f"{batch_id}, rows {row}..{row + table.num_rows - 1} of the task; the batch "
                    "is not committed"
                )
                raise
            bad = _bad_statuses(results)
            if bad:
                raise OSError(
                    f"rocketstore stream sink: put_batch returned {bad} for rows {row}.. of Spark "
                    f"partition {partition} of micro-batch {batch_id}"
                )
            row += table.num_rows
            if fail is not None and row >= fail[0]:
                _fail(fail[1], f"after {row} rows of partition {partition} of batch {batch_id}")
        return row

    # ---- driver side ------------------------------------------------------------------

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Appends the batch's commit record to every store its tasks wrote (driver side); on
        a remote root, publishes the batch's stores with a new manifest."""
        if self.writer.remote is not None:
            self._commit_remote(messages, batchId)
            return
        ours: list[SinkTaskMessage] = []
        for m in messages:
            if not isinstance(m, SinkTaskMessage):
                raise RuntimeError(
                    f"rocketstore stream sink: commit got {type(m).__name__} instead of a "
                    "SinkTaskMessage; the micro-batch is not committed"
                )
            ours.append(m)
        touched: dict[int, list[SinkTaskMessage]] = {}
        for m in ours:
            if m.messages > 0 or m.skipped is not None:
                touched.setdefault(m.store, []).append(m)
        if not touched:
            return
        jobs = sorted(touched.items())
        with ThreadPoolExecutor(max_workers=min(len(jobs), 8)) as pool:
            for f in [pool.submit(self._commit_store, i, ms, batchId) for i, ms in jobs]:
                f.result()

    def _commit_store(self, index: int, messages: list[SinkTaskMessage], batch: int) -> None:
        query, run = messages[0].query, messages[0].run
        fail = _failpoint("commit", batch, index)
        if fail is not None:
            _fail(fail[1], f"before committing store {index} of batch {batch}")
        path = self.store_path(index)
        store = self._open(path)
        try:
            commit, keep, ours = self._kept(store, query, run, batch)
            if commit is not None and commit.committed(query, batch):
                save_commit(store)  # a driver that died before copying it
                return
            found = {t.partition for t in ours}
            missing = sorted({m.partition for m in messages} - found)
            if missing:
                raise RuntimeError(
                    f"rocketstore stream sink: {path} lacks the rows of Spark partitions "
                    f"{missing} of micro-batch {batch} (their task records are not there); "
                    "the micro-batch is not committed"
                )
            store = self._cut_to(store, path, keep)
            put_commit(
                store, commit, query=query, batch=batch, messages=sum(t.messages for t in ours)
            )
            store.flush()
            save_commit(store)  # the bookkeeping outlives the file that holds the record
            with contextlib.suppress(Exception):  # retention must never fail a commit
                store.delete_expired_files()
        finally:
            store.close()

    def _commit_remote(self, messages: list[WriterCommitMessage | None], batch: int) -> None:
        """Publishes micro-batch ``batch`` on a remote root, once (see the module docs).

        Another job creating the manifest this commit meant to create (a batch write to the
        same root) is not the batch's failure: the commit reads the newest manifest and tries
        again, up to ``_REMOTE_COMMIT_TRIES`` times."""
        ours: list[SinkUploadMessage] = []
        for m in messages:
            if not isinstance(m, SinkUploadMessage):
                raise RuntimeError(
                    f"rocketstore stream sink: commit got {type(m).__name__} instead of a "
                    "SinkUploadMessage; the micro-batch is not committed"
                )
            ours.append(m)
        if not ours:
            return
        found = {(m.query, m.batch) for m in ours}
        if len(found) != 1 or found != {(ours[0].query, batch)}:
            raise RuntimeError(
                f"rocketstore stream sink: the tasks of micro-batch {batch} report queries and "
                f"batches {sorted(found)}; the micro-batch is not committed"
            )
        query = ours[0].query
        uploads = [m.upload for m in ours]
        if all(u.path is None for u in uploads):
            return  # no rows: nothing to publish, nothing to replay
        remote = self.writer.remote
        assert remote is not None
        fail = _failpoint("commit", batch, 0)
        if fail is not None:
            _fail(fail[1], f"before publishing micro-batch {batch}")
        for tried in range(1, _REMOTE_COMMIT_TRIES + 1):
            try:
                self.writer._commit_remote(
                    remote, uploads, stream=(query, batch), uploads=stream_uploads(query, batch)
                )
                return
            except CommitConflictError:
                if tried == _REMOTE_COMMIT_TRIES:
                    raise
                time.sleep(0.05 * tried)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo on a local root: rows past a store's last commit record are
        invisible to readers and cut away by the next writer of the store. On a remote root,
        the batch's uploads are removed (nothing reads them either)."""
        remote = self.writer.remote
        if remote is None:
            return
        for query in {m.query for m in messages if isinstance(m, SinkUploadMessage)}:
            with contextlib.suppress(Exception):
                remote.delete_tree(stream_uploads(query, batchId))


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest
