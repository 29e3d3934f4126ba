"""Type stubs for the native extension ``rocketstore._native`` (hand-written).

Checked against the compiled module by ``python -m mypy.stubtest rocketstore._native``.
Use the re-exports in :mod:`rocketstore` rather than this module directly.
"""

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeAlias, final

import pyarrow as pa
from typing_extensions import disjoint_base

from rocketstore._status import GetMessageStatus, PutMessageStatus
from rocketstore.exceptions import (
    CorruptionError as CorruptionError,
)
from rocketstore.exceptions import (
    DiskFullError as DiskFullError,
)
from rocketstore.exceptions import (
    InvalidConfigError as InvalidConfigError,
)
from rocketstore.exceptions import (
    InvalidMessageError as InvalidMessageError,
)
from rocketstore.exceptions import (
    MessageStoreError as MessageStoreError,
)
from rocketstore.exceptions import (
    MessageTooLargeError as MessageTooLargeError,
)
from rocketstore.exceptions import (
    OffsetOutOfRangeError as OffsetOutOfRangeError,
)
from rocketstore.exceptions import (
    StoreClosedError as StoreClosedError,
)
from rocketstore.exceptions import (
    StoreForkedError as StoreForkedError,
)
from rocketstore.exceptions import (
    StoreIOError as StoreIOError,
)
from rocketstore.exceptions import (
    StoreLockedError as StoreLockedError,
)
from rocketstore.exceptions import (
    StorePoisonedError as StorePoisonedError,
)
from rocketstore.exceptions import (
    StoreReadOnlyError as StoreReadOnlyError,
)
from rocketstore.exceptions import (
    UnsupportedFormatError as UnsupportedFormatError,
)

__all__ = [
    "DEFAULT_MAX_BATCH_BYTES",
    "PUT_COLUMNS",
    "ConfigField",
    "CorruptionError",
    "DiskFullError",
    "GetResult",
    "InvalidConfigError",
    "InvalidMessageError",
    "Message",
    "MessageStore",
    "MessageStoreError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "PutResult",
    "ScanIterator",
    "StoreCheck",
    "StoreClosedError",
    "StoreForkedError",
    "StoreIOError",
    "StoreLockedError",
    "StorePoisonedError",
    "StoreReadOnlyError",
    "StoreReport",
    "UnsupportedFormatError",
    "__version__",
    "_arrow_read_threads",
    "_arrow_split_counts",
    "arrow_schema",
    "body_digest",
    "body_sha256",
    "compress_body",
    "config_fields",
    "decompress_bodies",
    "decompress_body",
    "prepare_batch",
    "rebuild_indexes",
    "spark_conform",
    "spark_read_log",
    "spark_store_geometry",
    "truncate_store",
    "verify_store",
]

__version__: str
#: Default ``max_bytes`` of the Arrow reads: stored bytes per batch (8 MiB).
DEFAULT_MAX_BATCH_BYTES: int
#: The columns ``put_batch`` accepts (``put()``'s argument names), in their usual order.
PUT_COLUMNS: tuple[str, ...]

def _arrow_split_counts() -> tuple[int, int]:
    """Arrow read batches built on several threads, and split builds given up for one thread
    after their threads ran, since the process started (for tests)."""

def _arrow_read_threads(threads: int | None = None) -> int:
    """The threads one Arrow read batch may use; ``threads`` (1-4) sets it for this process
    whatever the cores (for tests: 2 splits ``read_arrow``'s columns, 3-4 the rows).
    Returns the value before the call."""

_ConfigValue: TypeAlias = int | bool | str

@final
class PutResult:
    """The result of putting one message."""

    @property
    def status(self) -> PutMessageStatus:
        """What happened (a ``str`` enum equal to RocketMQ's name, e.g. ``"PUT_OK"``)."""
    @property
    def msg_id(self) -> str:
        """The offset message id (store host + commit log offset, uppercase hex)."""
    @property
    def commitlog_offset(self) -> int:
        """Absolute commit log offset of the record (-1 if it was not written)."""
    @property
    def queue_offset(self) -> int:
        """Offset in the (topic, queue_id) consume queue (-1 if not written)."""
    @property
    def wrote_bytes(self) -> int:
        """Size of the record in bytes."""
    @property
    def store_timestamp(self) -> int:
        """STORETIMESTAMP written into the record (epoch milliseconds)."""
    @property
    def ok(self) -> bool:
        """True if ``status == "PUT_OK"``."""
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Message:
    """A message read back from the commit log (RocketMQ ``MessageExt``)."""

    @property
    def topic(self) -> str: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def commitlog_offset(self) -> int: ...
    @property
    def store_size(self) -> int: ...
    @property
    def body(self) -> bytes: ...
    @property
    def body_crc(self) -> int: ...
    @property
    def flag(self) -> int: ...
    @property
    def sys_flag(self) -> int: ...
    @property
    def tags(self) -> str | None: ...
    @property
    def keys(self) -> list[str]: ...
    @property
    def properties(self) -> dict[str, str]: ...
    @property
    def born_timestamp(self) -> int: ...
    @property
    def born_host(self) -> str: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def store_host(self) -> str: ...
    @property
    def reconsume_times(self) -> int: ...
    @property
    def prepared_transaction_offset(self) -> int: ...
    @property
    def msg_id(self) -> str: ...
    @property
    def uniq_key(self) -> str | None: ...
    def decompressed(self) -> Message:
        """This message with its body decompressed if it is compressed (``sys_flag`` bit 0),
        and the compression bits of ``sys_flag`` cleared; else this message.

        Example::

            r = store.put("TopicTest", b"x" * 10_000, compression="zstd")
            m = store.look_message_by_offset(r.commitlog_offset)
            assert m.decompressed().body == b"x" * 10_000
        """
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class GetResult:
    """The result of ``get_message`` / ``pull`` (RocketMQ ``GetMessageResult``).

    Example::

        r = store.get_message("TopicTest", 0, 0, 32)
        if r.status is GetMessageStatus.FOUND:
            for m in r.messages:
                print(m.queue_offset, m.body)
        offset = r.next_begin_offset
    """

    @property
    def status(self) -> GetMessageStatus:
        """What happened (a ``str`` enum equal to RocketMQ's name, e.g. ``"FOUND"``)."""
    @property
    def next_begin_offset(self) -> int:
        """Where the next read of this queue should start (RocketMQ's nextBeginOffset)."""
    @property
    def min_offset(self) -> int:
        """The queue's first offset."""
    @property
    def max_offset(self) -> int:
        """The queue's end: the offset the next message will get."""
    @property
    def messages(self) -> list[Message]:
        """The messages found, in queue order (a new list on each access)."""
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Message]: ...

@final
class ScanIterator:
    """Iterator over the messages of a store (see ``MessageStore.scan``)."""

    def __iter__(self) -> ScanIterator: ...
    def __next__(self) -> Message: ...
    def next_batch(self, n: int) -> list[Message]:
        """Up to ``n`` next messages; an empty list once the scan is exhausted."""
    @property
    def offset(self) -> int | None:
        """The commit log offset of the next message, or None at the end."""

@final
class ConfigField:
    """One configuration field of ``MessageStore(path, **config)``."""

    @property
    def name(self) -> str: ...
    @property
    def rocketmq_name(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def min(self) -> int | None: ...
    @property
    def max(self) -> int | None: ...
    @property
    def default(self) -> _ConfigValue: ...
    @property
    def doc(self) -> str: ...

@disjoint_base
class MessageStore:
    """A RocketMQ-compatible message store rooted at a directory."""

    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        **config: _ConfigValue,
    ) -> MessageStore: ...
    def put(
        self,
        topic: str,
        body: bytes | bytearray | memoryview,
        *,
        queue_id: int = 0,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
        born_timestamp: int | None = None,
        born_host: str | None = None,
        store_host: str | None = None,
        delay_level: int = 0,
        transaction: Literal["prepared", "commit", "rollback"] | None = None,
        prepared_transaction_offset: int = 0,
        producer_group: str | None = None,
        compression: str | None = None,
        compress_level: int = 5,
        compress_over: int = 4096,
    ) -> PutResult:
        """Puts one message and returns its :class:`PutResult`.

        ``keys`` as one str is stored as is (the index splits it on spaces, like RocketMQ's
        ``Message.setKeys(String)``); a list is joined with one space and an element containing a
        space raises :class:`InvalidMessageError`. ``delay_level`` (1-based) stores the message
        in ``SCHEDULE_TOPIC_XXXX`` queue ``delay_level - 1`` with
        ``REAL_TOPIC``/``REAL_QID``/``DELAY``; ``transaction`` makes it a prepared (half), commit
        or rollback record (prepared and rollback records get no consume queue entry and queue
        offset 0); a prepared record carries ``TRAN_MSG=true`` and, with ``producer_group``,
        ``PGROUP``, as a RocketMQ producer's half message does.

        Example::

            r = store.put("TopicTest", b"hello", tags="TagA", keys=["order-42"])
            later = store.put("TopicTest", b"in 5 s", delay_level=2)
            half = store.put("TopicTest", b"tx", transaction="prepared")
            store.put(
                "TopicTest",
                b"tx",
                transaction="commit",
                prepared_transaction_offset=half.commitlog_offset,
            )
        """
    def put_batch(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        compression: str | None = None,
        compress_level: int = 5,
        compress_over: int = 4096,
    ) -> list[PutResult]: ...
    def _put_arrow(
        self,
        data: object,
        *,
        compression: str | None = None,
        compress_level: int = 5,
        compress_over: int = 4096,
    ) -> pa.RecordBatch: ...
    def look_message_by_offset(
        self, commitlog_offset: int, *, decompress: bool = False
    ) -> Message: ...
    def scan(
        self, from_offset: int = 0, *, verify_crc: bool = False, decompress: bool = False
    ) -> ScanIterator: ...
    def min_commitlog_offset(self) -> int: ...
    def max_commitlog_offset(self) -> int: ...
    def flush(self) -> int: ...
    def cursors(self) -> dict[str, int]: ...
    def queue_offsets(self) -> list[tuple[str, int, int]]: ...
    def flush_count(self) -> int: ...
    def commitlog_files(self) -> list[str]: ...
    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_messages: int = 32,
        *,
        max_total_bytes: int | None = None,
        tags: str | None = None,
        decompress: bool = False,
    ) -> GetResult:
        """Reads up to ``max_messages`` messages of a queue from ``offset`` (RocketMQ
        ``getMessage``); "nothing to return" is a status of the result, never an exception.

        Example::

            r = store.get_message("TopicTest", 0, 0, 32, tags="TagA || TagB")
            for m in r.messages:
                print(m.body)
            offset = r.next_begin_offset
        """
    def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_messages: int = 32,
        *,
        timeout_ms: int = 15000,
        tags: str | None = None,
        max_total_bytes: int | None = None,
        decompress: bool = False,
    ) -> GetResult:
        """Long polling: like :meth:`get_message`, but waits up to ``timeout_ms`` for a
        matching message to arrive (GIL released; Ctrl-C interrupts it on the main thread).

        Example::

            end = store.max_offset_in_queue("TopicTest", 0)
            r = store.pull("TopicTest", 0, end, timeout_ms=5_000)
        """
    def progress_seq(self) -> int | None:
        """The progress sequence number of the writer this read-only store follows."""
    def wait_progress(self, seen: int | None, *, timeout_ms: int = 1000) -> int | None:
        """Waits until the followed writer publishes progress past ``seen``."""
    def query_message(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 32,
        begin: int = 0,
        end: int | None = None,
        decompress: bool = False,
    ) -> list[Message]:
        """Messages of ``topic`` whose ``KEYS`` entry or ``UNIQ_KEY`` equals ``key``, stored in
        ``[begin, end]`` (epoch ms), at most ``max_num``, in commit log order.

        Example::

            store.put("TopicTest", b"order", keys=["order-42"])
            [m] = store.query_message("TopicTest", "order-42")
        """
    def query_messages(
        self,
        topic: str,
        keys: Sequence[str],
        *,
        max_num: int = 32,
        begin: int = 0,
        end: int | None = None,
        decompress: bool = False,
    ) -> list[list[Message]]:
        """:meth:`query_message` of each of ``keys`` (all of ``topic``): one list of messages
        per key, in the order of ``keys`` (``[]`` for a key without a match). The lookups of
        one call overlap their memory reads: a batch costs less per key than one call per key.

        Example::

            store.put("TopicTest", b"a", keys=["order-1"])
            store.put("TopicTest", b"b", keys=["order-2"])
            found = store.query_messages("TopicTest", ["order-1", "order-2", "order-3"])
            assert [[m.body for m in ms] for ms in found] == [[b"a"], [b"b"], []]
        """
    def view_message_by_id(self, msg_id: str, *, decompress: bool = False) -> Message:
        """The message with an offset message id (``PutResult.msg_id``).

        Example::

            r = store.put("TopicTest", b"hello")
            assert store.view_message_by_id(r.msg_id).body == b"hello"
        """
    def get_offset_in_queue_by_time(
        self,
        topic: str,
        queue_id: int,
        timestamp_ms: int,
        boundary: Literal["lower", "upper"] = "lower",
    ) -> int:
        """The queue offset of the first message stored at/after ``timestamp_ms`` (``"lower"``)
        or of the last one stored at/before it (``"upper"``).

        Example::

            offset = store.get_offset_in_queue_by_time("TopicTest", 0, since_ms)
        """
    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The first queue offset still stored (0 for an unknown queue).

        Example::

            lo = store.min_offset_in_queue("TopicTest", 0)
        """
    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The offset the queue's next message will get (0 for an unknown queue).

        Example::

            hi = store.max_offset_in_queue("TopicTest", 0)
        """
    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """STORETIMESTAMP of the queue's first stored message, or -1.

        Example::

            oldest_ms = store.get_earliest_message_time("TopicTest", 0)
        """
    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """STORETIMESTAMP of the message at ``queue_offset``, or -1.

        Example::

            ts = store.get_message_store_timestamp("TopicTest", 0, 0)
        """
    def consume_queues(self) -> list[tuple[str, int, int, int]]:
        """Every consume queue as ``(topic, queue_id, min_offset, max_offset)``, sorted.

        Example::

            for topic, queue_id, lo, hi in store.consume_queues():
                print(topic, queue_id, hi - lo)
        """
    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Records ``group``'s next offset in a queue (persisted to
        ``config/consumerOffset.json``).

        Example::

            store.commit_offset("my-group", "TopicTest", 0, r.next_begin_offset)
        """
    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """``group``'s committed offset in a queue, or -1.

        Example::

            offset = store.query_offset("my-group", "TopicTest", 0)
        """
    def stats(self) -> dict[str, Any]:
        """Statistics (put/get per topic, put latency buckets, flush and dispatch lag, ...).

        Example::

            print(store.stats()["put_by_topic"])
        """
    def delete_expired_files(self, force: bool = False) -> dict[str, Any]:
        """Runs one cleanup pass now (RocketMQ ``executeDeleteFilesManually``): commit log files
        older than ``file_reserved_time`` hours (``force=True``: every deletable one), then the
        consume queue and index files covering only deleted data. Returns a report dict.

        Example::

            report = store.delete_expired_files(force=True)
            print(report["commitlog_files_deleted"], report["min_commitlog_offset"])
        """
    def is_disk_full(self) -> bool:
        """True while puts are refused because the disk usage is too high.

        Example::

            if store.is_disk_full():
                store.delete_expired_files(force=True)
        """
    def _set_clock_ms(self, now_ms: int | None) -> None: ...
    def _set_disk_usage(self, ratio: float | None) -> None: ...
    def _read_log_columns(
        self,
        from_offset: int,
        max_messages: int,
        end_offset: int | None,
        verify_crc: bool,
        max_bytes: int,
        columns: Sequence[str] | None = None,
        topic: str | None = None,
        tags: str | None = None,
    ) -> tuple[pa.RecordBatch, int]: ...
    def _read_queue_columns(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_messages: int,
        end_offset: int | None,
        verify_crc: bool,
        tags: str | None,
        max_bytes: int,
        columns: Sequence[str] | None = None,
    ) -> tuple[pa.RecordBatch, int]: ...
    def _read_cq_columns(
        self, topic: str, queue_id: int, offset: int, max_units: int
    ) -> pa.RecordBatch: ...
    def _read_index_columns(self) -> pa.RecordBatch: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> str: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def config(self) -> dict[str, _ConfigValue]: ...
    @property
    def recovery_report(self) -> dict[str, Any]:
        """Keys: abnormal, end_offset, records, truncated_at, files_removed, scan_start_file,
        scan_start_offset, walked_bytes, from_window, power_loss, redispatched."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> Literal[False]: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

def config_fields() -> list[ConfigField]: ...
def arrow_schema(name: str) -> pa.Schema: ...
def decompress_body(body: bytes, sys_flag: int, *, max_size: int = 67108864) -> bytes:
    """The body of a message as a RocketMQ consumer sees it: ``body`` decompressed if
    ``sys_flag`` marks it compressed (bit 0; the codec in bits 8-10: LZ4, Zstandard or zlib),
    otherwise ``body`` itself. ``max_size`` bounds the decompressed size.

    Raises :class:`CorruptionError` if the body is not valid data of its codec or expands
    past ``max_size``.

    Example::

        body = rocketstore.decompress_body(msg.body, msg.sys_flag)
    """

def compress_body(body: bytes, compression: str, level: int = 5) -> tuple[bytes, int]:
    """Compresses ``body`` as a RocketMQ producer does (``"lz4"``, ``"zstd"`` or ``"zlib"``);
    returns ``(stored_body, sys_flag_bits)``.

    Example::

        stored, bits = rocketstore.compress_body(b"x" * 10_000, "lz4")
        assert rocketstore.decompress_body(stored, bits) == b"x" * 10_000
    """

def rebuild_indexes(path: str | os.PathLike[str], **config: _ConfigValue) -> dict[str, Any]:
    """Rebuilds the consume queues and index files of a closed store from its commit log.

    Example::

        report = rocketstore.rebuild_indexes("/data/store")
        print(report["records"], "records re-dispatched")
    """

def truncate_store(
    path: str | os.PathLike[str], end_offset: int, **config: _ConfigValue
) -> dict[str, Any]:
    """Cuts a closed store's commit log back to ``end_offset`` (a record boundary): the records
    from there on leave the commit log, the consume queues and the index.

    Example::

        with rocketstore.MessageStore("/data/store") as s:
            mark = s.max_commitlog_offset()
            s.put("TopicTest", b"undo me")
        rocketstore.truncate_store("/data/store", mark)
    """

@final
class StoreCheck:
    """The outcome of one check of :func:`verify_store` on one store."""

    @property
    def name(self) -> str:
        """``crc``, ``framing``, ``consume_queue``, ``gap_free``, ``index`` or ``manifest``."""
    @property
    def ran(self) -> bool: ...
    @property
    def checked(self) -> int: ...
    @property
    def failed(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def examples(self) -> list[str]: ...
    @property
    def notes(self) -> list[str]: ...
    @property
    def passed(self) -> bool: ...

@final
class StoreReport:
    """What :func:`verify_store` found in one store."""

    @property
    def checks(self) -> list[StoreCheck]: ...
    @property
    def ok(self) -> bool: ...
    @property
    def messages(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def files(self) -> int: ...
    @property
    def min_offset(self) -> int: ...
    @property
    def max_offset(self) -> int: ...
    @property
    def body_digest(self) -> int: ...
    @property
    def queues(self) -> list[tuple[str, int, int, int, int]]:
        """``(topic, queue_id, messages, min_offset, max_offset)`` per queue."""
    @property
    def message_digests(self) -> list[tuple[str, int, int, int]]:
        """``(topic, queue_id, messages, sum of message digests)`` per queue: each digest is
        Spark SQL's ``xxhash64(topic, [queue_id,] keys, tags, body)`` of a record as an unsigned
        integer (the sums are 0 unless ``verify_store`` was given ``message_digest``)."""

def verify_store(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    manifest_entry: Mapping[str, Any] | None = None,
    sample_keys: int | None = None,
    message_digest: bool | None = None,
    committed_end: int | None = None,
    **config: _ConfigValue,
) -> StoreReport:
    """Verifies one store, opened read-only, in one native call (CRC, framing, consume queue
    against records, gap-free queues, every key through the index, the manifest entry).

    Example::

        report = rocketstore.verify_store("/data/stores/store-00000")
        assert report.ok, [c.examples for c in report.checks if not c.passed]
    """

def body_digest(bodies: Any) -> int:
    """The ``_SUCCESS`` manifest's body digest of an Arrow binary or string array."""

def body_sha256(bodies: Any, sys_flags: Any = None) -> Any:
    """The SHA-256 of each value of an Arrow binary or string array, as a hex string array;
    with ``sys_flags``, compressed bodies are hashed decompressed."""

def decompress_bodies(bodies: Any, sys_flags: Any, max_size: int = 67108864) -> Any:
    """A binary array of ``bodies`` as RocketMQ consumers see them (compressed ones, by their
    ``sys_flags`` entry, decompressed)."""

def spark_read_log(
    store: MessageStore,
    range: tuple[int, int],
    max_messages: int,
    verify_crc: bool,
    schema: pa.Schema,
    label: str,
) -> tuple[pa.RecordBatch, int]:
    """Commit log records as a batch of the Spark reader's Arrow schema, and the next offset."""

def spark_conform(batch: Any, schema: pa.Schema, label: str) -> pa.RecordBatch:
    """A message batch conformed to the Spark reader's Arrow schema (``label``: ``store``)."""

def prepare_batch(
    batch: Any, queue_selector: str, queue_nums: int, counter: int
) -> tuple[Any | None, int, int]:
    """Queue ids for the rows of a batch without one, the body digest, the next counter."""

def spark_store_geometry(
    path: str | os.PathLike[str], **config: int | bool | str
) -> dict[str, int]:
    """The file geometry a writable open of ``path`` would use with ``config`` (taken from the
    store's files where ``config`` leaves it at the default); reads only."""
