"""The write side of the ``rocketstore`` Spark data source: one store per task, published on commit.

Protocol (see :class:`RocketStoreWriter`):

1. On the driver, ``DataSource.writer`` checks the DataFrame's columns and the options (an
   unknown column or option fails the job before any task starts) and picks a job id (or
   takes the one the JVM writer picked, :data:`JVM_JOB_OPTION`; with the jar loaded the tasks
   below run in the JVM, ``rocketstore.spark.JvmWrite``, through the same Rust code, and send
   their messages through :func:`_from_jvm`).
2. Each task writes its rows into a new store under a path of its own attempt,
   ``<root>/_temporary/<job id>/part-<partition>-<task attempt id>``, from the Arrow batches
   Spark hands it (``put_batch``, GIL released), flushes and closes it, and returns a
   :class:`StoreCommitMessage` with the store's statistics. A task that fails removes its
   directory; one that is killed leaves it under ``_temporary``, where nobody reads.
3. On the driver, ``commit`` receives exactly one message per partition (Spark's output
   commit coordinator lets one attempt of each partition commit), takes an exclusive
   ``flock`` on the root directory (concurrent commits to one root run one at a time, each
   reading the manifest the one before wrote), renames each of those
   directories to ``<root>/store-<n>`` (``n`` above every existing store, zero-padded to 5
   digits), writes the ``_SUCCESS`` manifest atomically and deletes
   ``_temporary/<job id>`` with every other attempt in it. ``abort`` deletes
   ``_temporary/<job id>``. Retried and speculative attempts therefore never publish a store,
   and a published store is always a complete, flushed, closed one.

With ``mode("overwrite")``, ``commit`` first moves the old stores (every store root the reader
would find under ``root``) and the old manifest aside into the job's temporary directory,
publishes the new stores, then deletes the old ones; nothing else under ``root`` is touched.
If publishing fails half-way, the stores already renamed are moved back and the old ones
restored.

On a remote root (``s3a://...``, see :mod:`rocketstore._remote`) nothing is renamed: each task
builds its store in the executor's local directory and uploads it to the same
``_temporary/<job id>/part-...`` name; ``commit`` copies each committed attempt's files to
``store-<n>-<token>`` (``n`` above every store the newest manifest lists, ``token`` 16 random
hex digits of this commit's own: a commit writes only names no other job can use) and then
creates ``_manifests/<commit>.json`` (conditionally: the commit point), then the ``_SUCCESS``
hint. Its entries also list each store's ``files`` (name, size, data
extents, SHA-256), the only files readers download. The stream sink commits each micro-batch
of a remote root the same way (``_commit_remote`` with the query and batch id, which the
manifest's ``streams`` records so that a replayed micro-batch is published once).

Manifest (``<root>/_SUCCESS``, JSON)::

    {"format": "rocketstore-spark", "version": 1, "job_id": "...", "mode": "append",
     "written_at": "2024-01-01T00:00:00+00:00", "body_digest_algorithm": "...",
     "totals": {"stores": 2, "messages": 1000, "bytes": 250000},
     "stores": [{"path": "store-00000", "job_id": "...", "partition": 0, "task_attempt": 7,
                 "messages": 500, "bytes": 125000, "min_offset": 0, "max_offset": 125000,
                 "queues": {"TopicA": {"0": 125, "1": 125, ...}},
                 "body_digest": "1234567890123",
                 "config": {"mapped_file_size_commit_log": 1048576}}, ...],
     "streams": {"<query id>": 41}}

``streams`` (only where a stream sink published) maps each streaming query's id to the last
micro-batch it published; that query's store entries also hold ``query_id`` and ``batch_id``.

``min_offset`` is the commit log offset of the store's first record and ``max_offset`` the
offset after its last record (the store's ``max_commitlog_offset()``); ``bytes`` is the sum
of the records' sizes (``max_offset - min_offset`` minus the blanks at file ends);
``config`` holds the store configuration options the writer was given, which the reader
applies when it opens the store. With ``mode("append")`` the new stores are added to the stores
the old manifest listed, and take the file geometry of the newest existing store where the
options leave it out (a geometry option that contradicts an existing store's files is refused
before any task runs).

``body_digest`` is order-independent so a verifier can recompute it with a plain aggregation:
the sum, over the store's messages, of the first 60 bits of SHA-256(body) read as an unsigned
big-endian integer (the first 15 hex digits of ``sha2(body, 256)``), as a decimal string. In
Spark SQL: ``sum(cast(conv(substr(sha2(body, 256), 1, 15), 16, 10) as decimal(38, 0)))``.
Unlike an XOR, a sum also tells a duplicated message from a missing one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from rocketstore._remote import (
    KILL_BEFORE_MANIFEST,
    RemoteRoot,
    kill_point_for_tests,
    local_work_dir,
    manifest_name,
    resolve_root,
)
from rocketstore._stores import MANIFEST, TEMPORARY, find_stores, is_store
from rocketstore.exceptions import InvalidConfigError, InvalidMessageError
from rocketstore.spark._heap import freeze_worker_heap
from rocketstore.spark._options import (
    GEOMETRY_FIELDS,
    check_geometry,
    normalize,
    parse_int,
    split_options,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType, StructType

    from rocketstore import MessageStore

__all__ = [
    "MANIFEST",
    "TEMPORARY",
    "WRITER_OPTIONS",
    "RocketStoreWriter",
    "StoreCommitMessage",
    "body_digest",
]

#: Description of ``body_digest`` written into the manifest.
DIGEST_ALGORITHM = (
    "sum over messages of the first 60 bits of sha256(body) as an unsigned big-endian "
    "integer (first 15 hex digits), decimal string"
)

#: The writer's own options (everything else must be a store configuration keyword).
WRITER_OPTIONS = ("queueSelector", "queueNums", "compressionType", "compressLevel", "compressOver")

#: Codecs of the ``compressionType`` option (``none``: bodies are stored as given).
COMPRESSION_TYPES = ("none", "lz4", "zstd", "zlib")

#: Internal option set by the JVM batch writer (``rocketstore.spark.JvmWrite``, never by users):
#: the job id it picked (32 hex digits). With it the Python writer uses that job id and writes
#: :data:`JVM_TASK_SPEC` into the job's directory for the JVM tasks.
JVM_JOB_OPTION = "rocketstore.jvmJobId"

#: File in ``_temporary/<job id>`` with what the JVM tasks need of the options (JSON).
JVM_TASK_SPEC = "_jvm_task.json"

_JOB_ID = re.compile(r"^[0-9a-f]{32}$")

_STORE_NAME = re.compile(r"^store-(\d+)$")
#: A store a remote commit published: ``store-<n>`` (older manifests) or
#: ``store-<n>-<token>``, the token drawn by that commit alone.
_REMOTE_STORE_NAME = re.compile(r"^store-(\d+)(?:-[0-9a-f]+)?$")
#: Hex digits of a remote commit's token (64 random bits).
_TOKEN_DIGITS = 16
_ACCEPTED_STATUSES = frozenset({"PUT_OK", "FLUSH_DISK_TIMEOUT"})


# --------------------------------------------------------------------------------------
# Digest and statistics
# --------------------------------------------------------------------------------------


def body_digest(bodies: pa.Array[Any] | pa.ChunkedArray[Any]) -> int:
    """The manifest's ``body_digest`` of ``bodies`` (binary or string values), as an int.

    Computed natively over the Arrow buffers (``rocketstore._native.body_digest``).

    Example::


        import pyarrow as pa

        d = body_digest(pa.array([b"a", b"b"]))
        assert d == sum(int(hashlib.sha256(b).hexdigest()[:15], 16) for b in (b"a", b"b"))
    """
    import pyarrow as pa

    from rocketstore._native import body_digest as native_digest

    if isinstance(bodies, pa.ChunkedArray):
        return sum(native_digest(chunk) for chunk in bodies.chunks)
    return native_digest(bodies)


@dataclass
class _StoreStats:
    messages: int = 0
    bytes: int = 0
    min_offset: int | None = None
    max_offset: int | None = None
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    body_digest: int = 0

    def add_batch(self, results: pa.RecordBatch, digest: int) -> None:
        import pyarrow.compute as pc

        n = results.num_rows
        if n == 0:
            return
        self.messages += n
        self.bytes += int(pc.sum(results.column("wrote_bytes")).as_py() or 0)
        if self.min_offset is None:
            self.min_offset = int(results.column("commitlog_offset")[0].as_py())
        self.body_digest += digest

    def finish(self, store: MessageStore) -> None:
        """Takes the end offset and the per-queue counts from the (fresh) store."""
        self.max_offset = store.max_commitlog_offset()
        for topic, queue_id, next_offset in store.queue_offsets():
            self.queues.setdefault(topic, {})[str(queue_id)] = next_offset

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "bytes": self.bytes,
            "min_offset": self.min_offset if self.min_offset is not None else 0,
            "max_offset": self.max_offset if self.max_offset is not None else 0,
            "queues": {
                t: dict(sorted(q.items(), key=lambda kv: int(kv[0])))
                for t, q in sorted(self.queues.items())
            },
            "body_digest": str(self.body_digest),
        }


@dataclass(frozen=True)
class StoreCommitMessage(WriterCommitMessage):
    """What a write task reports to the driver: its store's temporary path and statistics.

    ``path`` is ``None`` when the task had no rows (no store is published for it).
    """

    partition: int
    task_attempt: int
    attempt_number: int
    path: str | None
    stats: dict[str, Any]

    @classmethod
    def from_json(cls, text: str) -> StoreCommitMessage:
        """The message a JVM write task sends (``rocketstore.spark.JvmWrite``): a JSON object
        with this class's fields."""
        d = json.loads(text)
        return cls(
            partition=int(d["partition"]),
            task_attempt=int(d["task_attempt"]),
            attempt_number=int(d["attempt_number"]),
            path=None if d.get("path") is None else str(d["path"]),
            stats=dict(d.get("stats") or {}),
        )


def _from_jvm(text: str) -> StoreCommitMessage:
    """Unpickles a JVM write task's commit message.

    The JVM task (``rocketstore.spark.JvmWrite``) hands Spark a ``PythonWriterCommitMessage``
    whose bytes are a minimal pickle calling this function with its JSON, so that the driver's
    Python ``commit`` receives a :class:`StoreCommitMessage` like from a Python task.
    """
    return StoreCommitMessage.from_json(text)


# --------------------------------------------------------------------------------------
# Column checks and queue selection
# --------------------------------------------------------------------------------------


def _put_columns() -> tuple[str, ...]:
    from rocketstore._arrow import COLUMNS

    return tuple(COLUMNS)


def _check_type(name: str, dtype: DataType) -> None:
    from pyspark.sql import types as T

    text = (T.StringType, T.VarcharType, T.CharType)
    ints = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    from rocketstore._arrow import _TEXT_COLUMNS

    ok: bool
    if name in _TEXT_COLUMNS:
        ok = isinstance(dtype, text)
        want = "string"
    elif name == "body":
        ok = isinstance(dtype, (T.BinaryType, *text))
        want = "binary (or string)"
    elif name == "keys":
        ok = isinstance(dtype, text) or (
            isinstance(dtype, T.ArrayType) and isinstance(dtype.elementType, text)
        )
        want = "string (space-separated keys) or array<string>"
    elif name == "properties":
        ok = (
            isinstance(dtype, T.MapType)
            and isinstance(dtype.keyType, text)
            and isinstance(dtype.valueType, text)
        )
        want = "map<string, string>"
    elif name == "born_timestamp":
        ok = isinstance(dtype, (T.TimestampType, T.TimestampNTZType, *ints))
        want = "timestamp or bigint (epoch milliseconds)"
    else:
        ok = isinstance(dtype, ints)
        want = "an integer type"
    if not ok:
        err = InvalidMessageError(
            f"invalid {name}: column {name!r} has Spark type {dtype.simpleString()}, "
            f"expected {want}"
        )
        err.field = name
        raise err


def check_schema(schema: StructType) -> None:
    """Checks the DataFrame's columns against ``put``'s arguments (on the driver)."""
    allowed = _put_columns()
    names = [f.name for f in schema.fields]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        err = InvalidMessageError(
            f"invalid message: the DataFrame has columns {unknown} that are not put() "
            f"arguments; select only these columns: {', '.join(allowed)} (topic and body "
            "are required)"
        )
        err.field = unknown[0]
        raise err
    for required in ("topic", "body"):
        if required not in names:
            err = InvalidMessageError(
                f"invalid {required}: the DataFrame has no {required!r} column "
                f"(columns: {', '.join(names) or 'none'})"
            )
            err.field = required
            raise err
    for f in schema.fields:
        _check_type(f.name, f.dataType)


def _compress_options(own: Mapping[str, str]) -> dict[str, Any]:
    """``put_batch``'s compression keywords from the ``compressionType``, ``compressLevel``
    and ``compressOver`` options."""
    kind = str(own.get(normalize("compressionType"), "none")).strip().lower()
    if kind not in COMPRESSION_TYPES:
        err = InvalidConfigError(
            f"option 'compressionType' must be one of {', '.join(COMPRESSION_TYPES)}, not {kind!r}"
        )
        err.key = "compressionType"
        raise err
    level = parse_int("compressLevel", own.get(normalize("compressLevel"), "5"))
    if kind != "none":
        from rocketstore._native import compress_body

        try:  # the engine holds each codec's level range
            compress_body(b"", kind, level)
        except (InvalidConfigError, OverflowError) as e:
            err = InvalidConfigError(f"option 'compressLevel': {e}")
            err.key = "compressLevel"
            raise err from None
    return {
        "compression": None if kind == "none" else kind,
        "compress_level": level,
        "compress_over": parse_int(
            "compressOver", own.get(normalize("compressOver"), "4096"), minimum=0
        ),
    }


def _queue_selector(value: str | None) -> str:
    if value is None:
        return "hash"
    v = normalize(value)
    if v == "hash":
        return "hash"
    if v == "roundrobin":
        return "round_robin"
    err = InvalidConfigError(
        f"option 'queueSelector' must be 'hash' (of the keys) or 'round_robin', not {value!r}"
    )
    err.key = "queueSelector"
    raise err


def _prepare(
    batch: pa.RecordBatch, selector: str, queue_nums: int, counter: int
) -> tuple[pa.RecordBatch, int, int]:
    """Fills a missing or null ``queue_id`` with the selector's choice and digests the bodies.

    One native call over the batch's buffers (``rocketstore._native.prepare_batch``): no
    per-row Python. Returns ``(batch, body digest, next round robin counter)``.
    """
    from rocketstore._native import prepare_batch

    queues, digest, counter = prepare_batch(batch, selector, queue_nums, counter)
    if queues is None:
        return batch, digest, counter
    names = batch.schema.names
    if "queue_id" in names:
        batch = batch.set_column(names.index("queue_id"), "queue_id", queues)
    else:
        batch = batch.append_column("queue_id", queues)
    return batch, digest, counter


# --------------------------------------------------------------------------------------
# The writer
# --------------------------------------------------------------------------------------


def _bad_statuses(results: pa.RecordBatch) -> list[str]:
    """The distinct statuses of a ``put_batch`` result that are not an accepted ``PUT_OK``.

    ``pyarrow.compute.unique`` over the (dictionary) column: a per-row ``to_pylist`` here cost
    more than the append itself.
    """
    import pyarrow.compute as pc

    found = pc.unique(results.column("status")).to_pylist()
    return [str(s) for s in found if s not in _ACCEPTED_STATUSES]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


LIVE_MARKER = "_job_live"
"""File in ``_temporary/<job id>`` while the job runs (created on the driver at planning)."""


@contextlib.contextmanager
def _commit_lock(root: Path) -> Iterator[None]:
    """Holds an exclusive ``flock`` on the root directory itself (no file is created): local
    commits to one root run one at a time, each reading the manifest the previous one wrote.
    Where the file system refuses ``flock`` on a directory (some NFS setups), the commit runs
    without it."""
    import fcntl

    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as e:
            if e.errno not in (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                raise
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _remove_empty_parents(path: Path, levels: int) -> None:
    """Removes ``path`` and up to ``levels - 1`` of its parents while they are empty.

    A failed task attempt runs this after removing its store: the driver's ``abort`` may already
    have run (Spark calls it when the first task fails, while others still run), so the last
    attempt out removes ``_temporary/<job id>`` and ``_temporary``. ``rmdir`` only removes an empty
    directory, so a directory another attempt is writing into stays.
    """
    for _ in range(levels):
        try:
            path.rmdir()
        except OSError:
            return
        path = path.parent


def _task_identity() -> tuple[int, int, int]:
    """(partition id, task attempt id, attempt number) of the running Spark task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, 0, 0
    return ctx.partitionId(), ctx.taskAttemptId(), ctx.attemptNumber()


def _delete_copies(remote: RemoteRoot, entries: list[dict[str, Any]]) -> None:
    """Deletes the stores a remote commit copied (names of its own; what fails stays, unlisted
    and never read)."""
    for e in entries:
        with contextlib.suppress(Exception):
            remote.delete_tree(str(e["path"]))


def _holds(remote: RemoteRoot, rel: str, data: bytes) -> bool | None:
    """Whether the object ``rel`` holds exactly ``data`` (None if it cannot be read)."""
    try:
        return remote.read_bytes(rel) == data
    except Exception:
        return None


def _published(streams: Mapping[str, Any], query: str, batch: int) -> bool:
    """True if a manifest's ``streams`` (query id -> last published micro-batch) holds
    micro-batch ``batch`` of query ``query``."""
    last = streams.get(query)
    return isinstance(last, int) and not isinstance(last, bool) and last >= batch


class RocketStoreWriter(DataSourceArrowWriter):
    """Writes each Spark task's rows into its own store; ``commit`` publishes them.

    Created on the driver by ``df.write.format("rocketstore")`` (see the package docs for
    the options); pickled to every task. See the module docstring for the protocol.

    Example::

        df.write.format("rocketstore").mode("append").option(
            "mappedFileSizeCommitLog", 64 * 1024 * 1024
        ).save("/data/stores")
    """

    def __init__(
        self,
        options: Mapping[str, str],
        schema: StructType,
        overwrite: bool,
        *,
        live_marker: bool = True,
    ) -> None:
        path = options.get("path")
        if not path:
            err = InvalidConfigError(
                "the rocketstore writer needs a root directory: df.write.format('rocketstore')"
                ".save('/path/to/root')"
            )
            err.key = "path"
            raise err
        jvm_job = [k for k in options if normalize(k) == normalize(JVM_JOB_OPTION)]
        jvm_job_id = str(options[jvm_job[0]]) if jvm_job else None
        if jvm_job_id is not None and not _JOB_ID.match(jvm_job_id):
            err = InvalidConfigError(
                f"option {JVM_JOB_OPTION!r} is internal to the JVM writer (32 hex digits), "
                f"not {jvm_job_id!r}"
            )
            err.key = JVM_JOB_OPTION
            raise err
        user_options = {k: v for k, v in options.items() if k not in jvm_job}
        own, config = split_options(user_options, WRITER_OPTIONS, what="writer")
        # A URI's scheme is checked here, on the driver, before any task runs.
        self.root, self.remote = resolve_root(str(path), options)
        self.config = config
        self.selector = _queue_selector(own.get(normalize("queueSelector")))
        self.queue_nums = parse_int("queueNums", own.get("queuenums", "4"), minimum=1)
        self.compress = _compress_options(own)
        self.overwrite = overwrite
        self.job_id = jvm_job_id or uuid.uuid4().hex
        check_schema(schema)
        self.live_marker = live_marker
        if self.remote is not None:
            if jvm_job_id is not None:  # the JVM writer leaves remote roots to Python tasks
                raise InvalidConfigError(f"the JVM writer does not write to {self.root}")
            if live_marker:
                self.remote.write_bytes(self._remote_job(LIVE_MARKER), b"")
            return
        root = Path(self.root)
        if root.exists() and not root.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "the write path is not a directory", self.root)
        if is_store(root):
            err = InvalidConfigError(
                f"{self.root} is itself a store (it has commitlog/); write to a directory "
                "that holds stores, e.g. its parent or a new directory"
            )
            err.key = "path"
            raise err
        if not overwrite and root.is_dir():
            self._take_geometry(user_options)
        # The job's live marker: tasks write only while it exists; commit and abort remove it
        # first (see `_cleanup`), so an attempt that outlives the job removes its own store.
        # (A stream writer runs one job per micro-batch and cleans up by stream instead.)
        if live_marker:
            self.job_dir.mkdir(parents=True, exist_ok=True)
            self._live_marker.touch()
        if jvm_job_id is not None:
            self._write_jvm_task_spec()

    def _take_geometry(self, options: Mapping[str, str]) -> None:
        """Appending: checks the geometry options against the files of the stores under the
        root (a contradiction is refused here, before any task runs, naming the option as
        given and the value found) and gives the new stores the geometry of the newest
        existing one where the options leave it out, so a root keeps one geometry without
        the user repeating the options that created it."""
        from rocketstore import config_fields

        stores = find_stores(Path(self.root))
        found = check_geometry(stores, self.config, options)
        defaults = {f.name: f.default for f in config_fields()}
        for key in GEOMETRY_FIELDS:
            if key not in self.config and key in found and found[key] != defaults.get(key):
                self.config[key] = found[key]

    def _write_jvm_task_spec(self) -> None:
        """What the JVM tasks need, in the job's directory: the store configuration (values
        as strings, parsed by kind in Rust), the queue selector and the number of queues."""
        self.job_dir.mkdir(parents=True, exist_ok=True)
        config = {
            k: (str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in sorted(self.config.items())
        }
        if self.compress["compression"] is not None:
            # The native task writer takes these out of the pairs before configuring the store.
            config["compressionType"] = str(self.compress["compression"])
            config["compressLevel"] = str(self.compress["compress_level"])
            config["compressOver"] = str(self.compress["compress_over"])
        spec = {
            "config": config,
            "queue_selector": self.selector,
            "queue_nums": self.queue_nums,
            "live_marker": self.live_marker,
        }
        (self.job_dir / JVM_TASK_SPEC).write_text(json.dumps(spec), encoding="utf-8")

    # ---- paths ------------------------------------------------------------------------

    @property
    def _live_marker(self) -> Path:
        return self.job_dir / LIVE_MARKER

    @property
    def job_dir(self) -> Path:
        """``<root>/_temporary/<job id>``: every attempt of this job writes below it."""
        return Path(self.root) / TEMPORARY / self.job_id

    def _remote_job(self, name: str = "") -> str:
        """``_temporary/<job id>[/name]`` below a remote root."""
        return f"{TEMPORARY}/{self.job_id}" + (f"/{name}" if name else "")

    def _job_live(self) -> bool:
        if not self.live_marker:
            return True
        if self.remote is not None:
            return self.remote.exists(self._remote_job(LIVE_MARKER))
        return self._live_marker.exists()

    def attempt_dir(self, partition: int, task_attempt: int) -> Path:
        """The store directory of one task attempt."""
        return self.job_dir / f"part-{partition:05d}-{task_attempt}"

    # ---- executor side ----------------------------------------------------------------

    def _open(self, path: Path) -> MessageStore:
        from rocketstore import MessageStore

        if not self._job_live():
            raise OSError(
                f"rocketstore writer: job {self.job_id} has already ended (committed or aborted); "
                "this task attempt writes nothing"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():  # a previous run of this very attempt id cannot exist; be safe
            _remove_tree(path)
        config: dict[str, Any] = dict(self.config)
        # A task writes its store once, front to back, and usually fills a fraction of its last
        # commit log file: pre-faulting whole files (and the next one, never used) in the
        # allocate service costs more CPU than the pages the writer touches. Only the pages
        # written are faulted in unless the job asks otherwise; the files are the same.
        config.setdefault("populate_mapped_file", False)
        # Records are staged in a small reused buffer and written into the commit log with
        # `pwrite` (the same bytes): faulting the fresh, fallocated pages of the mapping costs a
        # read-ahead and zero-fill per page, `pwrite` neither. `flush` below makes them durable
        # (msync of the range covers pages written either way).
        config.setdefault("pwrite_commit_log", True)
        return MessageStore(path, **config)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StoreCommitMessage:  # type: ignore[override]
        """Writes this task's batches into a fresh store (executor side).

        The first task of a worker process freezes the objects the process has
        (:func:`~rocketstore.spark._heap.freeze_worker_heap`), so the full collection PySpark's
        worker runs after every task skips them.
        """
        freeze_worker_heap()
        return self._write(iterator)

    def _write(
        self, iterator: Iterator[pa.RecordBatch], *, upload_dir: str | None = None
    ) -> StoreCommitMessage:
        """The task's store, written (and on a remote root uploaded below ``upload_dir``,
        default ``_temporary/<job id>``: the stream sink gives each micro-batch its own)."""
        partition, task_attempt, attempt_number = _task_identity()
        if self.remote is not None:
            # Built on this executor's local disk, uploaded once closed (see _upload).
            path = (
                local_work_dir()
                / f"rocketstore-write-{self.job_id}-{partition:05d}-{task_attempt}-{os.getpid()}"
            )
        else:
            path = self.attempt_dir(partition, task_attempt)
        stats = _StoreStats()
        counter = partition % self.queue_nums
        store: MessageStore | None = None
        row = 0
        try:
            for batch in iterator:
                if batch.num_rows == 0:
                    continue
                table, digest, counter = _prepare(batch, self.selector, self.queue_nums, counter)
                if store is None:
                    store = self._open(path)
                try:
                    results = store.put_batch(table, **self.compress)
                except Exception as e:
                    e.add_note(
                        f"rocketstore writer: Spark partition {partition} (task attempt "
                        f"{task_attempt}), rows {row}..{row + table.num_rows - 1} of the task; "
                        "nothing of this task is published"
                    )
                    raise
                bad = _bad_statuses(results)
                if bad:
                    raise OSError(
                        f"rocketstore writer: put_batch returned {bad} for rows {row}.. of "
                        f"Spark partition {partition}; nothing of this task is published"
                    )
                stats.add_batch(results, digest)
                row += table.num_rows
            if store is None:
                return StoreCommitMessage(partition, task_attempt, attempt_number, None, {})
            store.flush()
            stats.finish(store)
            store.close()
            store = None
            if self.remote is not None:
                base = upload_dir if upload_dir is not None else self._remote_job()
                remote_path = f"{base}/part-{partition:05d}-{task_attempt}"
                uploaded = self._upload(path, remote_path)
                stats_dict = {**stats.as_dict(), "files": uploaded}
                _remove_tree(path)
                return StoreCommitMessage(
                    partition, task_attempt, attempt_number, remote_path, stats_dict
                )
            if not self._job_live():
                # Spark aborted the job (another task failed) while this attempt ran: the
                # driver's cleanup may have missed this store, so remove it here.
                raise OSError(
                    f"rocketstore writer: job {self.job_id} ended while Spark partition "
                    f"{partition} (task attempt {task_attempt}) ran; its store is removed"
                )
        except BaseException:
            if store is not None:
                with contextlib.suppress(Exception):  # the original error is the one to report
                    store.close()
            _remove_tree(path)
            if self.remote is None:
                _remove_empty_parents(path.parent, levels=2)  # <job id>, then _temporary
            raise
        return StoreCommitMessage(
            partition, task_attempt, attempt_number, str(path), stats.as_dict()
        )

    def _upload(self, local: Path, remote_path: str) -> list[dict[str, Any]]:
        """Uploads the closed store at ``local`` to ``remote_path`` (below the job's directory,
        which nothing reads); returns its file list with sizes and SHA-256. A failure or a job
        that ended meanwhile removes what was uploaded."""
        assert self.remote is not None
        try:
            files = self.remote.upload_store(local, remote_path)
            if not self._job_live():
                raise OSError(
                    f"rocketstore writer: job {self.job_id} ended while {remote_path} was "
                    "uploaded; it is removed"
                )
        except BaseException:
            with contextlib.suppress(Exception):
                self.remote.delete_tree(remote_path)
            raise
        return files

    # ---- driver side ------------------------------------------------------------------

    def _cleanup(self) -> None:
        if self.remote is not None:
            with contextlib.suppress(OSError):
                self.remote.delete_tree(self._remote_job(LIVE_MARKER))
            self.remote.delete_tree(self._remote_job())
            return
        with contextlib.suppress(OSError):
            self._live_marker.unlink()  # first: attempts still running stop publishing
        _remove_tree(self.job_dir)
        with contextlib.suppress(OSError):  # only if no other job is running
            (Path(self.root) / TEMPORARY).rmdir()

    def _read_manifest(self) -> dict[str, Any]:
        """The current manifest as a dict (empty if there is none or it is not ours)."""
        path = Path(self.root) / MANIFEST
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != "rocketstore-spark":
            return {}
        return data

    def _existing_streams(self) -> dict[str, Any]:
        """``streams`` of the current manifest: query id -> its last published micro-batch."""
        streams = self._read_manifest().get("streams")
        return dict(streams) if isinstance(streams, dict) else {}

    def _existing_manifest(self) -> list[dict[str, Any]]:
        data = self._read_manifest()
        stores = data.get("stores")
        if not isinstance(stores, list):
            return []
        root = Path(self.root)
        return [s for s in stores if isinstance(s, dict) and is_store(root / str(s.get("path")))]

    def _next_index(self) -> int:
        root = Path(self.root)
        used = [-1]
        if root.is_dir():
            for child in root.iterdir():
                m = _STORE_NAME.match(child.name)
                if m:
                    used.append(int(m.group(1)))
        return max(used) + 1

    def _publish(self, src: Path, index: int) -> tuple[Path, int]:
        """Renames ``src`` to the first free ``store-<n>`` from ``index``; returns it."""
        root = Path(self.root)
        while True:
            dest = root / f"store-{index:05d}"
            if not dest.exists():
                try:
                    os.rename(src, dest)
                except OSError as e:
                    if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                        raise
                else:
                    return dest, index + 1
            index += 1

    def _write_manifest(
        self, stores: list[dict[str, Any]], streams: dict[str, Any] | None = None
    ) -> None:
        """Replaces the manifest atomically (write, fsync, rename, fsync the directory).

        ``streams`` (query id -> last published micro-batch, see ``_commit_remote``) is
        written when not empty.
        """
        root = Path(self.root)
        manifest = self._manifest(stores, streams)
        tmp = root / f".{MANIFEST}.{self.job_id}.tmp"
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, root / MANIFEST)
        _fsync_dir(root)

    def _manifest(
        self, stores: list[dict[str, Any]], streams: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        manifest: dict[str, Any] = {
            "format": "rocketstore-spark",
            "version": 1,
            "job_id": self.job_id,
            "mode": "overwrite" if self.overwrite else "append",
            "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "body_digest_algorithm": DIGEST_ALGORITHM,
            "totals": {
                "stores": len(stores),
                "messages": sum(int(s.get("messages", 0)) for s in stores),
                "bytes": sum(int(s.get("bytes", 0)) for s in stores),
            },
            "stores": stores,
        }
        if streams:
            manifest["streams"] = dict(sorted(streams.items()))
        return manifest

    def _commit_remote(
        self,
        remote: RemoteRoot,
        ours: list[StoreCommitMessage],
        *,
        stream: tuple[str, int] | None = None,
        uploads: str | None = None,
    ) -> bool:
        """Publishes on a remote root: copies each committed attempt's files to
        ``store-<n>-<token>``, then creates the manifest of the next commit number
        (conditionally: the commit point), then writes the ``_SUCCESS`` hint; then removes
        the uploads and, with ``overwrite``, the stores the previous manifest listed. Returns
        True if it published, False for a stream's micro-batch published before.

        Nothing is renamed and nothing is listed: ``n`` and the commit number follow the
        newest manifest, and ``token`` (random, drawn by this call) makes every name it
        writes one no other commit uses, so two jobs committing from the same newest manifest
        never write the same object. A driver killed before the manifest exists publishes
        nothing (its copies are listed by no manifest, and only listed files are read); one
        killed after it has committed. A commit that loses the conditional create to another
        job (:class:`CommitConflictError`) deletes its own copies and nothing else.

        ``stream`` is ``(query id, batch id)`` when the stream sink commits a micro-batch: the
        manifest's ``streams`` maps every query that published to the root to its last
        published batch id (carried by every later manifest, ``overwrite`` too), and a batch
        the newest manifest already holds (a micro-batch Spark replays after a driver died
        between this create and its checkpoint) is not published again; its uploads are
        removed. ``uploads`` is the directory of the tasks' uploads, removed once done
        (default: the job's ``_temporary/<job id>``).
        """
        commit, current = remote.latest_manifest()
        recorded = (current or {}).get("streams")
        streams = dict(recorded) if isinstance(recorded, dict) else {}
        if stream is not None and _published(streams, *stream):
            self._remove_uploads(remote, uploads)
            return False
        old = [s for s in (current or {}).get("stores", []) if isinstance(s, dict) and "path" in s]
        used = [-1]
        for s in old:
            m = _REMOTE_STORE_NAME.match(str(s["path"]))
            if m:
                used.append(int(m.group(1)))
        index = max(used) + 1
        # Names no other commit can choose: another job committing from the same newest
        # manifest picks the same numbers, never the same token.
        token = uuid.uuid4().hex[:_TOKEN_DIGITS]
        origin = {} if stream is None else {"query_id": stream[0], "batch_id": stream[1]}
        entries: list[dict[str, Any]] = []
        try:
            for msg in sorted(ours, key=lambda msg: msg.partition):
                if msg.path is None:
                    continue
                name = f"store-{index:05d}-{token}"
                index += 1
                entries.append(
                    {
                        "path": name,
                        "job_id": self.job_id,
                        **origin,
                        "partition": msg.partition,
                        "task_attempt": msg.task_attempt,
                        **msg.stats,
                        "config": dict(sorted(self.config.items())),
                    }
                )
                remote.copy_store(msg.path, name, msg.stats.get("files", []))
        except BaseException:
            _delete_copies(remote, entries)  # this commit's own names only
            raise
        if stream is not None:
            streams[stream[0]] = stream[1]
        kept = [] if self.overwrite else old
        manifest = self._manifest(kept + entries, streams)
        manifest["commit"] = commit + 1
        data = (json.dumps(manifest, indent=1) + "\n").encode()
        note = {"job_id": self.job_id, "stores": entries}
        kill_point_for_tests(KILL_BEFORE_MANIFEST, note, value=str(commit + 1))
        try:
            remote.create_exclusive(manifest_name(commit + 1), data)
        except BaseException as failure:
            # A create that failed may still have happened (a request retried after its first
            # try landed answers "exists"): a manifest holding exactly these bytes is ours and
            # the commit stands. Otherwise every name copied to is this commit's own, so
            # removing them cannot touch what another job published; if the check itself
            # fails they stay, unlisted, and are never read.
            created = _holds(remote, manifest_name(commit + 1), data)
            if created is False:
                _delete_copies(remote, entries)
            if not created or not isinstance(failure, Exception):
                raise
        # Committed. The hint and the clean-up may fail without undoing the commit.
        with contextlib.suppress(OSError):
            remote.write_bytes(MANIFEST, data)
        with contextlib.suppress(OSError):
            self._remove_uploads(remote, uploads)
        if self.overwrite:
            for s in old:
                with contextlib.suppress(OSError):
                    remote.delete_tree(str(s["path"]))
        return True

    def _remove_uploads(self, remote: RemoteRoot, uploads: str | None) -> None:
        if uploads is None:
            self._cleanup()
        else:
            remote.delete_tree(uploads)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Publishes one store per partition and writes the manifest (driver side)."""
        root = Path(self.root)
        ours: list[StoreCommitMessage] = []
        for m in messages:
            if not isinstance(m, StoreCommitMessage):
                raise RuntimeError(
                    f"rocketstore writer: commit got {type(m).__name__} instead of a "
                    "StoreCommitMessage; nothing was published"
                )
            ours.append(m)
        if self.remote is not None:
            self._commit_remote(self.remote, ours)
            return
        root.mkdir(parents=True, exist_ok=True)
        with _commit_lock(root):
            self._commit_local(root, ours)
        self._cleanup()

    def _commit_local(self, root: Path, ours: list[StoreCommitMessage]) -> None:
        """Renames the stores into place and replaces the manifest (under the root's lock)."""
        replaced: list[tuple[Path, Path]] = []
        published: list[tuple[Path, Path]] = []
        manifest_backup: Path | None = None
        try:
            if self.overwrite:
                aside = self.job_dir / "replaced"
                aside.mkdir(parents=True, exist_ok=True)
                for i, old in enumerate(find_stores(root)):
                    if old == root:
                        continue
                    target = aside / f"{i:05d}"
                    os.rename(old, target)
                    replaced.append((old, target))
                if (root / MANIFEST).exists():
                    manifest_backup = aside / MANIFEST
                    os.rename(root / MANIFEST, manifest_backup)
                kept: list[dict[str, Any]] = []
                streams: dict[str, Any] = {}
            else:
                kept = self._existing_manifest()
                streams = self._existing_streams()
            index = self._next_index()
            entries: list[dict[str, Any]] = []
            for m in sorted(ours, key=lambda m: m.partition):
                if m.path is None:
                    continue
                dest, index = self._publish(Path(m.path), index)
                published.append((Path(m.path), dest))
                entry = {
                    "path": dest.relative_to(root).as_posix(),
                    "job_id": self.job_id,
                    "partition": m.partition,
                    "task_attempt": m.task_attempt,
                    **m.stats,
                    "config": dict(sorted(self.config.items())),
                }
                entries.append(entry)
            _fsync_dir(root)
            self._write_manifest(kept + entries, streams)
        except BaseException:
            for src, dest in reversed(published):
                try:
                    os.rename(dest, src)
                except OSError:
                    _remove_tree(dest)
            for old, target in reversed(replaced):
                with contextlib.suppress(OSError):
                    old.parent.mkdir(parents=True, exist_ok=True)
                    os.rename(target, old)
            if manifest_backup is not None:
                with contextlib.suppress(OSError):
                    os.rename(manifest_backup, root / MANIFEST)
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Removes every attempt's store of this job (driver side); publishes nothing."""
        self._cleanup()
