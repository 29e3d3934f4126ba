"""The batch read side of the ``rocketstore`` Spark data source.

``spark.read.format("rocketstore").load(path)`` reads one store (``path`` has a
``commitlog/`` directory) or every store below ``path`` (see
:func:`rocketstore._stores.find_stores`). Every store is opened with
``read_only=True``: reading never changes a byte on disk.

Partitioning (option ``partitioning``):

* ``file`` -- one partition per commit log file, read in commit log order with
  ``read_arrow``. Returns every record in the files, including records no consume queue
  points to. The default when no ``topics``/offsets/timestamps are given (a full read).
* ``queue`` -- one partition per (store, topic, queue), read through the consume queue with
  ``get_message_arrow`` between a start and an end queue offset. The default when
  ``topics``, ``startingOffsets``, ``endingOffsets``, ``startingTimestamp`` or
  ``endingTimestamp`` is given. ``table=consumequeue`` is always read this way.

``table=index`` reads every entry of every index file, one partition per store.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rocketstore._remote import RemoteRoot, resolve_root
from rocketstore._stores import ABORT_FILE, MANIFEST, commitlog_files, find_stores, store_key
from rocketstore.exceptions import InvalidConfigError
from rocketstore.spark._heap import freeze_worker_heap
from rocketstore.spark._options import (
    EARLIEST,
    GEOMETRY_FIELDS,
    LATEST,
    OffsetSpec,
    check_geometry,
    geometry_options,
    lookup_offset,
    normalize,
    parse_bool,
    parse_int,
    parse_offsets,
    split_options,
)
from rocketstore.spark._sink_log import is_sink_store

if TYPE_CHECKING:
    import pyarrow as pa

    from rocketstore import MessageStore

__all__ = [
    "CONSUME_QUEUE_SCHEMA",
    "INDEX_SCHEMA",
    "MESSAGE_SCHEMA",
    "READER_OPTIONS",
    "FilePartition",
    "IndexPartition",
    "QueuePartition",
    "ReadSettings",
    "RocketStoreReader",
    "schema_for",
]


def _s(name: str, dtype: Any) -> StructField:
    return StructField(name, dtype, True)


#: Spark schema of ``table=messages`` (the default): the columns of
#: ``rocketstore.MESSAGE_SCHEMA`` plus ``store``, the path of the store the row came from.
MESSAGE_SCHEMA = StructType(
    [
        _s("topic", StringType()),
        _s("queue_id", IntegerType()),
        _s("queue_offset", LongType()),
        _s("commitlog_offset", LongType()),
        _s("store_size", IntegerType()),
        _s("body", BinaryType()),
        _s("body_crc", IntegerType()),
        _s("flag", IntegerType()),
        _s("sys_flag", IntegerType()),
        _s("tags", StringType()),
        _s("keys", StringType()),
        _s("properties", MapType(StringType(), StringType(), True)),
        _s("born_timestamp", TimestampType()),
        _s("born_host", StringType()),
        _s("store_timestamp", TimestampType()),
        _s("store_host", StringType()),
        _s("reconsume_times", IntegerType()),
        _s("prepared_transaction_offset", LongType()),
        _s("msg_id", StringType()),
        _s("uniq_key", StringType()),
        _s("store", StringType()),
    ]
)

#: Spark schema of ``table=consumequeue``: one row per consume queue unit.
CONSUME_QUEUE_SCHEMA = StructType(
    [
        _s("topic", StringType()),
        _s("queue_id", IntegerType()),
        _s("queue_offset", LongType()),
        _s("commitlog_offset", LongType()),
        _s("size", IntegerType()),
        _s("tags_code", LongType()),
        _s("store", StringType()),
    ]
)

#: Spark schema of ``table=index``: one row per index file entry.
INDEX_SCHEMA = StructType(
    [
        _s("file", StringType()),
        _s("file_begin_timestamp", TimestampType()),
        _s("slot", IntegerType()),
        _s("entry", IntegerType()),
        _s("key_hash", IntegerType()),
        _s("commitlog_offset", LongType()),
        _s("time_diff_s", IntegerType()),
        _s("prev_index", IntegerType()),
        _s("store", StringType()),
    ]
)

_TABLES = {
    "messages": MESSAGE_SCHEMA,
    "consumequeue": CONSUME_QUEUE_SCHEMA,
    "index": INDEX_SCHEMA,
}

#: The reader's own options (everything else must be a store configuration keyword).
READER_OPTIONS = (
    "table",
    "topics",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "verifyCrc",
    "partitioning",
    "maxMessagesPerBatch",
    "maxOffsetsPerTrigger",
)

_QUEUE_OPTIONS = (
    "topics",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
)


def _error(key: str, message: str) -> InvalidConfigError:
    err = InvalidConfigError(message)
    err.key = key
    return err


def _table_name(options: Mapping[str, str]) -> str:
    value = options.get("table", "messages")
    name = normalize(str(value))
    if name not in _TABLES:
        raise _error(
            "table", f"option 'table' must be messages, consumequeue or index, not {value!r}"
        )
    return name


def schema_for(options: Mapping[str, str]) -> StructType:
    """The Spark schema the ``table`` option selects."""
    return _TABLES[_table_name(options)]


# --------------------------------------------------------------------------------------
# Settings and partitions
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadSettings:
    """The parsed read options; picklable, shipped to every task."""

    root: str
    table: str
    topics: tuple[str, ...] | None
    starting_default: int
    starting: OffsetSpec
    ending_default: int
    ending: OffsetSpec
    starting_timestamp: int | None
    ending_timestamp: int | None
    verify_crc: bool
    partitioning: str
    batch_size: int
    max_offsets_per_trigger: int | None
    config: dict[str, int | bool | str]
    #: The geometry options as the user spelled them (option name -> value), to name them.
    geometry_options: dict[str, str] = field(default_factory=dict)
    #: A remote root (``s3://...``; ``root`` is then its URI): stores are read from local
    #: copies, downloaded by the tasks that need them (see :mod:`rocketstore._remote`).
    remote: RemoteRoot | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, what: str = "reader") -> ReadSettings:
        """Parses and checks the Spark options (on the driver)."""
        path = options.get("path")
        if not path:
            raise _error(
                "path",
                "the rocketstore reader needs a path: spark.read.format('rocketstore')"
                ".load('/path/to/store-or-root')",
            )
        own, config = split_options(options, READER_OPTIONS, what=what)
        table = _table_name(own)
        topics: tuple[str, ...] | None = None
        if "topics" in own:
            topics = tuple(t.strip() for t in own["topics"].split(",") if t.strip())
            if not topics:
                raise _error("topics", "option 'topics' is a comma-separated list of topics")
        s_default, starting = parse_offsets("startingOffsets", own.get("startingoffsets"), EARLIEST)
        e_default, ending = parse_offsets("endingOffsets", own.get("endingoffsets"), LATEST)
        s_ts = own.get("startingtimestamp")
        e_ts = own.get("endingtimestamp")
        queue_options = [k for k in _QUEUE_OPTIONS if k in own]
        partitioning = normalize(own.get("partitioning", ""))
        if not partitioning:
            partitioning = "queue" if queue_options or table == "consumequeue" else "file"
        if partitioning not in ("file", "queue"):
            raise _error(
                "partitioning",
                f"option 'partitioning' must be file or queue, not {own['partitioning']!r}",
            )
        if partitioning == "file" and table == "messages":
            bad = [k for k in queue_options if k != "topics"]
            if bad:
                raise _error(
                    bad[0],
                    f"options {bad} select queue offsets; they need "
                    "partitioning=queue (the default when they are given)",
                )
        if table == "consumequeue" and partitioning != "queue":
            raise _error("partitioning", "table=consumequeue is read per queue")
        max_per_trigger = own.get("maxoffsetspertrigger")
        root, remote = resolve_root(str(path), options)
        if remote is not None:
            remote_entries(remote)  # no manifest: an error on the driver, before any task
        return cls(
            root=root,
            remote=remote,
            table=table,
            topics=topics,
            starting_default=s_default,
            starting=starting,
            ending_default=e_default,
            ending=ending,
            starting_timestamp=parse_int("startingTimestamp", s_ts) if s_ts else None,
            ending_timestamp=parse_int("endingTimestamp", e_ts) if e_ts else None,
            verify_crc=parse_bool("verifyCrc", own.get("verifycrc", "false")),
            partitioning=partitioning,
            batch_size=parse_int(
                "maxMessagesPerBatch", own.get("maxmessagesperbatch", "16384"), minimum=1
            ),
            max_offsets_per_trigger=(
                parse_int("maxOffsetsPerTrigger", max_per_trigger, minimum=1)
                if max_per_trigger
                else None
            ),
            config=config,
            geometry_options=geometry_options(options),
        )

    def store_ref(self, key: str) -> str:
        """The ``store`` of a partition for the store named ``key`` (relative to the root)."""
        if self.remote is not None:
            return self.remote.child(key)
        return str(Path(self.root) if key == "." else Path(self.root) / key)

    def stores(self) -> list[Path]:
        """Every store root under the path; an error if there is none.

        Geometry options (``mappedFileSizeCommitLog``, ...) are checked against every store's
        files here, on the driver: one that contradicts them is refused before a task runs.
        """
        if self.remote is not None:
            raise RuntimeError(f"{self.root} is a remote root: see remote_entries()")
        root = Path(self.root)
        if not root.is_dir():
            raise FileNotFoundError(2, "no such directory to read stores from", self.root)
        stores = find_stores(root)
        if not stores:
            raise FileNotFoundError(
                2, "no RocketMQ store (a directory with commitlog/) at or below", self.root
            )
        if any(k in self.config for k in GEOMETRY_FIELDS):
            check_geometry(stores, self.config, self.geometry_options)
        return stores

    def open(self, store: str | Path) -> MessageStore:
        """Opens one store read-only.

        The configuration is the one the Spark writer recorded for the store in the manifest
        of its parent directory (if any), overridden by the options given to the reader.
        """
        from rocketstore import MessageStore

        if self.remote is not None:
            entry = remote_entry(self.remote, str(store))
            local = self.remote.fetch(entry)  # this executor's cached copy
            listed = entry.get("config")
            config: dict[str, Any] = {**(listed if isinstance(listed, dict) else {})}
            config.update(self.config)
            if not self.verify_crc and "check_crc_on_recover" not in config:
                config["check_crc_on_recover"] = False  # published closed, as below
            return MessageStore(local, read_only=True, **config)
        path = Path(store)
        recorded = manifest_config(path)
        config = {**(recorded or {}), **self.config}
        if (
            recorded is not None
            and not self.verify_crc
            and "check_crc_on_recover" not in config
            and not (path / ABORT_FILE).exists()
        ):
            # A store a committed job published was flushed and closed (no abort file): the
            # open finds its end by the records' framing, and without `verifyCrc` no body CRC
            # is checked anywhere else either (the open would check only the last three files').
            config["check_crc_on_recover"] = False
        return MessageStore(store, read_only=True, **config)

    def wants(self, topic: str) -> bool:
        """True if ``topic`` is selected by the ``topics`` option (or there is none)."""
        return self.topics is None or topic in self.topics


_REMOTE_ENTRIES: dict[str, list[dict[str, Any]]] = {}


def remote_entries(remote: RemoteRoot) -> list[dict[str, Any]]:
    """The store entries of the newest manifest of a remote root (read anew at each call; a
    remote root is read through its manifest only, never listed)."""
    _, manifest = remote.latest_manifest()
    if manifest is None:
        raise FileNotFoundError(
            2,
            "no rocketstore manifest (_SUCCESS, _manifests/) at the remote root: remote roots "
            "are read through the manifest a Spark write commits",
            remote.uri,
        )
    stores = manifest.get("stores")
    entries = [e for e in stores if isinstance(e, dict) and "path" in e] if stores else []
    _REMOTE_ENTRIES[remote.uri] = entries
    return entries


def remote_entry(remote: RemoteRoot, uri: str) -> dict[str, Any]:
    """The manifest entry of the remote store ``uri`` (the manifest is read again if the
    entries this process knows do not list it)."""
    rel = remote.rel_of(uri)
    for attempt in range(2):
        known = _REMOTE_ENTRIES.get(remote.uri) if attempt == 0 else remote_entries(remote)
        for e in known or []:
            if str(e["path"]) == rel:
                return e
    raise FileNotFoundError(2, "the manifest does not list this store", uri)


def _remote_file_partitions(remote: RemoteRoot) -> list[FilePartition]:
    """One partition per commit log file of every store the manifest lists (their names and
    sizes are in the manifest: nothing is downloaded on the driver)."""
    parts: list[FilePartition] = []
    for entry in remote_entries(remote):
        uri = remote.child(str(entry["path"]))
        for f in remote.store_files(entry):
            name = str(f["name"])
            base = name.rsplit("/", 1)[-1]
            if f.get("dir") or not name.startswith("commitlog/") or len(base) != 20:
                continue
            if base.isdigit() and int(f.get("size", 0)) > 0:
                start = int(base)
                parts.append(FilePartition(uri, start, start + int(f["size"])))
    return parts


def _remote_queues(settings: ReadSettings, remote: RemoteRoot) -> list[QueueInfo]:
    """The queues of every store the manifest lists: each written store starts every queue
    at offset 0 and ends at the manifest's count; a store listed without counts is downloaded
    and opened."""
    out: list[QueueInfo] = []
    for entry in remote_entries(remote):
        key = str(entry["path"])
        uri = remote.child(key)
        queues = entry.get("queues")
        if isinstance(queues, dict):
            for topic, qs in sorted(queues.items()):
                if settings.wants(topic):
                    for qid, end in sorted(qs.items(), key=lambda kv: int(kv[0])):
                        out.append(QueueInfo(key, uri, topic, int(qid), 0, int(end)))
            continue
        with settings.open(uri) as s:
            for topic, qid, first, end in s.consume_queues():
                if settings.wants(topic):
                    out.append(QueueInfo(key, uri, topic, qid, first, end))
    return out


def manifest_config(store: Path) -> dict[str, int | bool | str] | None:
    """The store configuration the ``_SUCCESS`` manifest next to ``store`` records for it.

    ``None`` if no manifest there lists ``store`` (a store no committed job published).
    """
    import json

    try:
        data = json.loads((store.parent / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return _sink_store_config(store)
    if not isinstance(data, dict) or not isinstance(data.get("stores"), list):
        return None
    for entry in data["stores"]:
        if isinstance(entry, dict) and entry.get("path") == store.name:
            config = entry.get("config")
            if isinstance(config, dict):
                return {str(k): v for k, v in config.items() if isinstance(v, (int, bool, str))}
            return {}
    return None


def _sink_store_config(store: Path) -> dict[str, int | bool | str] | None:
    """The store configuration a stream sink's root records for its stores (see
    ``_stream_writer``), or None if ``store`` is not in a sink root."""
    from rocketstore.spark._stream_writer import sink_config

    meta = sink_config(store.parent)
    if meta is None:
        return None
    config = meta.get("config")
    if not isinstance(config, dict):
        return {}
    return {str(k): v for k, v in config.items() if isinstance(v, (int, bool, str))}


@dataclass(frozen=True)
class FilePartition(InputPartition):
    """The records of one commit log file: ``[start, end)`` of one store."""

    store: str
    start: int
    end: int


@dataclass(frozen=True)
class QueuePartition(InputPartition):
    """Queue offsets ``[start, end)`` of one (store, topic, queue)."""

    store: str
    topic: str
    queue_id: int
    start: int
    end: int


@dataclass(frozen=True)
class IndexPartition(InputPartition):
    """Every index entry of one store."""

    store: str


@dataclass(frozen=True)
class QueueInfo:
    """One queue of one store as a planner sees it."""

    key: str  # the store's name relative to the root
    store: str  # the store's absolute path
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int


def list_queues(settings: ReadSettings, stores: Sequence[Path] | None = None) -> list[QueueInfo]:
    """Every selected (store, topic, queue) with its current min and max offsets.

    A stream sink's store (:func:`is_sink_store`) shows its queues as its last commit record
    left them (nothing of a micro-batch not committed yet) and hides the sink's own topic.
    """
    from rocketstore.spark._sink_log import MARKER_TOPIC, last_commit

    if settings.remote is not None and stores is None:
        return _remote_queues(settings, settings.remote)
    root = Path(settings.root)
    out: list[QueueInfo] = []
    for store in settings.stores() if stores is None else stores:
        key = store_key(root, store)
        sink = is_sink_store(store)
        with settings.open(store) as s:
            commit = last_commit(s) if sink else None
            for topic, qid, first, end in s.consume_queues():
                if not settings.wants(topic) or (sink and topic == MARKER_TOPIC):
                    continue
                lo, hi = first, end
                if sink:
                    hi = min(end, commit.cap(topic, qid)) if commit is not None else first
                    lo = min(first, hi)
                out.append(QueueInfo(key, str(store), topic, qid, lo, hi))
    return out


def _resolve(offset: int, q: QueueInfo) -> int:
    if offset == EARLIEST:
        return q.min_offset
    if offset == LATEST:
        return q.max_offset
    return min(max(offset, q.min_offset), q.max_offset)


def plan_queue_ranges(
    settings: ReadSettings, stores: Sequence[Path] | None = None
) -> list[QueuePartition]:
    """The (store, topic, queue) partitions with their start and end offsets."""
    parts: list[QueuePartition] = []
    by_store: dict[str, list[QueueInfo]] = {}
    for q in list_queues(settings, stores):
        by_store.setdefault(q.store, []).append(q)
    for store, queues in by_store.items():
        timed = settings.starting_timestamp is not None or settings.ending_timestamp is not None
        handle = settings.open(store) if timed else None
        try:
            for q in queues:
                start = _resolve(
                    lookup_offset(
                        settings.starting, settings.starting_default, q.key, q.topic, q.queue_id
                    ),
                    q,
                )
                end = _resolve(
                    lookup_offset(
                        settings.ending, settings.ending_default, q.key, q.topic, q.queue_id
                    ),
                    q,
                )
                if handle is not None and settings.starting_timestamp is not None:
                    start = _resolve(
                        handle.get_offset_in_queue_by_time(
                            q.topic, q.queue_id, settings.starting_timestamp
                        ),
                        q,
                    )
                if handle is not None and settings.ending_timestamp is not None:
                    end = _resolve(
                        handle.get_offset_in_queue_by_time(
                            q.topic, q.queue_id, settings.ending_timestamp
                        ),
                        q,
                    )
                if end > start:
                    parts.append(QueuePartition(store, q.topic, q.queue_id, start, end))
        finally:
            if handle is not None:
                handle.close()
    return parts


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def _arrow_target(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _native_target(target: pa.Schema) -> bool:
    """True if every column of ``target`` has its default Spark type (``MESSAGE_SCHEMA``):
    the batches are then built or conformed natively (``rocketstore._native.spark_*``),
    with no pyarrow cast. Other types (a user schema such as ``queue_id long``) are cast."""
    defaults = _default_types()
    return all(f.name in defaults and f.type.equals(defaults[f.name]) for f in target)


_DEFAULT_TYPES: dict[str, pa.DataType] = {}


def _default_types() -> dict[str, pa.DataType]:
    if not _DEFAULT_TYPES:
        _DEFAULT_TYPES.update({f.name: f.type for f in _arrow_target(MESSAGE_SCHEMA)})
    return _DEFAULT_TYPES


def _conform(batch: pa.RecordBatch, store: str, target: pa.Schema) -> pa.RecordBatch:
    """Adds the ``store`` column and casts to the Arrow form of the Spark schema."""
    import pyarrow as pa

    store_col = pa.repeat(pa.scalar(store, pa.string()), batch.num_rows)
    arrays: list[Any] = []
    for f in target:
        if f.name == "store":
            arrays.append(store_col)
        else:
            arrays.append(batch.column(f.name))
    full = pa.RecordBatch.from_arrays(arrays, names=target.names)
    return full.cast(target)


def _filter_topics(batch: pa.RecordBatch, topics: Sequence[str] | None) -> pa.RecordBatch:
    if topics is None or batch.num_rows == 0:
        return batch
    import pyarrow as pa
    import pyarrow.compute as pc

    return batch.filter(pc.is_in(batch.column("topic"), value_set=pa.array(list(topics))))


def read_file(
    settings: ReadSettings, store: MessageStore, p: FilePartition, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The records of one commit log file, in commit log order.

    With the default column types and no ``topics`` filter, each batch is built natively in
    the Arrow form of the Spark schema, holding only the requested columns when none of them
    needs the properties (``rocketstore._native.spark_read_log``)."""
    from rocketstore._native import spark_conform, spark_read_log

    native = _native_target(target)
    offset = p.start
    while offset < p.end:
        if native and settings.topics is None:
            batch, nxt = spark_read_log(
                store, (offset, p.end), settings.batch_size, settings.verify_crc, target, p.store
            )
            if batch.num_rows:
                yield batch
        else:
            batch, nxt = store.read_arrow(
                offset,
                max_messages=settings.batch_size,
                end_offset=p.end,
                verify_crc=settings.verify_crc,
            )
            batch = _filter_topics(batch, settings.topics)
            if batch.num_rows:
                yield (
                    spark_conform(batch, target, p.store)
                    if native
                    else _conform(batch, p.store, target)
                )
        if nxt <= offset:
            break
        offset = nxt


def read_queue(
    settings: ReadSettings, store: MessageStore, p: QueuePartition, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The messages of queue offsets ``[start, end)`` of one queue."""
    from rocketstore._native import spark_conform

    native = _native_target(target)
    offset = max(p.start, store.min_offset_in_queue(p.topic, p.queue_id))
    while offset < p.end:
        batch, nxt = store.get_message_arrow(
            p.topic,
            p.queue_id,
            offset,
            settings.batch_size,
            end_offset=p.end,
            verify_crc=settings.verify_crc,
        )
        if batch.num_rows:
            yield (
                spark_conform(batch, target, p.store)
                if native
                else _conform(batch, p.store, target)
            )
        if nxt <= offset:
            break
        offset = nxt


def read_cq(
    settings: ReadSettings, store: MessageStore, p: QueuePartition, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The consume queue units of queue offsets ``[start, end)`` of one queue."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offset = p.start
    while offset < p.end:
        batch = store.read_consume_queue(
            p.topic, p.queue_id, offset, min(settings.batch_size, p.end - offset)
        )
        if batch.num_rows == 0:
            break
        qo: Any = batch.column("queue_offset")
        last = int(qo[batch.num_rows - 1].as_py())
        batch = batch.filter(pc.less(qo, pa.scalar(p.end, pa.int64())))
        if batch.num_rows:
            yield _conform(batch, p.store, target)
        if last + 1 <= offset:
            break
        offset = last + 1


def read_partition(
    settings: ReadSettings, schema: StructType, partition: InputPartition
) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one partition (executor side).

    The first task of a worker process freezes the objects the process has
    (:func:`~rocketstore.spark._heap.freeze_worker_heap`), so the full collection PySpark's
    worker runs after every task skips them.
    """
    if not isinstance(partition, (FilePartition, QueuePartition, IndexPartition)):
        return iter(())  # the single empty partition Spark plans when a read has none
    freeze_worker_heap()
    return _read_partition(settings, schema, partition)


def _read_partition(
    settings: ReadSettings,
    schema: StructType,
    partition: FilePartition | QueuePartition | IndexPartition,
) -> Iterator[pa.RecordBatch]:
    target = _arrow_target(schema)
    with settings.open(partition.store) as store:
        if isinstance(partition, FilePartition):
            yield from read_file(settings, store, partition, target)
        elif isinstance(partition, IndexPartition):
            batch = store.read_index()
            for i in range(0, batch.num_rows, settings.batch_size):
                yield _conform(batch.slice(i, settings.batch_size), partition.store, target)
        elif settings.table == "consumequeue":
            yield from read_cq(settings, store, partition, target)
        else:
            yield from read_queue(settings, store, partition, target)


def _check_schema(schema: StructType, table: str) -> None:
    available = {f.name for f in _TABLES[table].fields}
    unknown = [f.name for f in schema.fields if f.name not in available]
    if unknown:
        raise _error(
            "schema",
            f"columns {unknown} are not in the rocketstore {table} table "
            f"(columns: {', '.join(f.name for f in _TABLES[table].fields)})",
        )


class RocketStoreReader(DataSourceReader):
    """Plans and reads the partitions of ``spark.read.format("rocketstore").load(path)``.

    Example::

        df = (
            spark.read.format("rocketstore")
            .option("topics", "TopicA,TopicB")
            .option("startingOffsets", '{"TopicA": {"0": 100}}')
            .load("/data/stores")
        )
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.settings = ReadSettings.parse(options)
        _check_schema(schema, self.settings.table)
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per commit log file, per queue or per store (see the module docs)."""
        s = self.settings
        parts: list[InputPartition] = []
        if s.remote is not None and s.partitioning == "file" and s.table == "messages":
            parts.extend(_remote_file_partitions(s.remote))
        elif s.remote is not None and s.table == "index":
            parts.extend(
                IndexPartition(s.remote.child(str(e["path"]))) for e in remote_entries(s.remote)
            )
        elif s.table == "index":
            parts.extend(IndexPartition(str(p)) for p in s.stores())
        elif s.partitioning == "queue":
            parts.extend(plan_queue_ranges(s))
        else:
            sinks: list[Path] = []
            for store in s.stores():
                if is_sink_store(store):  # read per queue, up to its last committed batch
                    sinks.append(store)
                    continue
                for start, size in commitlog_files(store):
                    if size > 0:
                        parts.append(FilePartition(str(store), start, start + size))
            if sinks:
                parts.extend(plan_queue_ranges(s, sinks))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of one partition, built in Rust (executor side)."""
        return read_partition(self.settings, self.schema, partition)
