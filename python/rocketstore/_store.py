"""``rocketstore.MessageStore``: the native handle plus its Arrow input and output."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, overload

from rocketstore import _native, _queues
from rocketstore._status import GetMessageStatus
from rocketstore.exceptions import InvalidMessageError

if TYPE_CHECKING:
    from typing import Literal

    import pyarrow as pa

__all__ = [
    "DEFAULT_MAX_BATCH_BYTES",
    "ArrowArrayExportable",
    "ArrowStreamExportable",
    "GetMessageStatus",
    "MessageStore",
]

#: Default ``max_bytes`` of :meth:`MessageStore.read_arrow` and
#: :meth:`MessageStore.get_message_arrow`: stored bytes per batch (8 MiB).
DEFAULT_MAX_BATCH_BYTES: int = _native.DEFAULT_MAX_BATCH_BYTES


class ArrowStreamExportable(Protocol):
    """Any object with Arrow's C Stream PyCapsule method (a pyarrow ``Table`` or
    ``RecordBatchReader``, a polars ``DataFrame``, a DuckDB relation, ...)."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...


class ArrowArrayExportable(Protocol):
    """Any object with Arrow's C Data PyCapsule method for a struct array (a pyarrow
    ``RecordBatch``, ...)."""

    def __arrow_c_array__(
        self, requested_schema: object | None = None
    ) -> tuple[object, object]: ...


def _count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be int, not {type(value).__name__}")
    if value < 0:
        err = InvalidMessageError(f"invalid {name}: {value} is negative")
        err.field = name
        raise err
    return value


def _columns(columns: Sequence[str] | None) -> list[str] | None:
    """``columns`` checked against ``MESSAGE_SCHEMA`` (repeats dropped, order kept)."""
    if columns is None:
        return None
    if isinstance(columns, str):
        raise TypeError("columns must be a list of column names, not a str (use [name])")
    from rocketstore._arrow import MESSAGE_SCHEMA

    names = MESSAGE_SCHEMA.names
    out: list[str] = []
    for c in columns:
        if not isinstance(c, str):
            raise TypeError(f"columns must hold str, not {type(c).__name__}")
        if c not in names:
            err = InvalidMessageError(
                f"invalid columns: {c!r} is not a message column (columns: {', '.join(names)})"
            )
            err.field = "columns"
            raise err
        if c not in out:
            out.append(c)
    return out


def _select(batch: pa.RecordBatch, columns: list[str] | None) -> pa.RecordBatch:
    """``batch`` (in schema order) with the columns in the order asked for."""
    if columns is None or batch.schema.names == columns:
        return batch
    return batch.select(columns)


def _projected_schema(columns: list[str] | None) -> pa.Schema:
    """The schema of the batches of ``columns`` (every column if None)."""
    import pyarrow

    from rocketstore._arrow import MESSAGE_SCHEMA

    if columns is None:
        return MESSAGE_SCHEMA
    return pyarrow.schema([MESSAGE_SCHEMA.field(c) for c in columns])


def _decompress_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with each compressed ``body`` decompressed and its ``sys_flag`` compression
    bits cleared (the batch has both columns)."""
    import pyarrow
    import pyarrow.compute

    pc: Any = pyarrow.compute  # the stubs reject bit_wise_and on a column and an int
    flags = batch.column("sys_flag")
    compressed = pc.not_equal(pc.bit_wise_and(flags, 1), 0)
    if batch.num_rows == 0 or not pc.any(compressed).as_py():
        return batch
    bodies: list[Any] = batch.column("body").to_pylist()
    values: list[Any] = flags.to_pylist()
    for i, on in enumerate(compressed.to_pylist()):
        if on:
            bodies[i] = _native.decompress_body(bodies[i], values[i])
            values[i] &= ~(0x1 | 0x700)
    out = batch.set_column(
        batch.schema.get_field_index("body"), "body", pyarrow.array(bodies, pyarrow.binary())
    )
    return out.set_column(
        batch.schema.get_field_index("sys_flag"), "sys_flag", pyarrow.array(values, pyarrow.int32())
    )


def _is_arrow(obj: object) -> bool:
    # Arrow's PyCapsule interface: any producer (pyarrow, polars, DuckDB, ...), not one class.
    t = type(obj)
    return hasattr(t, "__arrow_c_stream__") or hasattr(t, "__arrow_c_array__")


class MessageStore(_native.MessageStore):
    """A RocketMQ-compatible message store rooted at a directory.

    ``MessageStore(path, *, read_only=False, **config)`` opens the store (creating the
    directory if needed) and recovers it. ``config`` keywords are the fields listed by
    :func:`rocketstore.config_fields`, for example ``mapped_file_size_commit_log=64 * 1024``
    or ``flush_disk_type="SYNC_FLUSH"``; an unknown name raises
    :class:`~rocketstore.exceptions.InvalidConfigError` with the closest matches.
    ``read_only=True`` opens any RocketMQ store without changing a byte and refuses writes.

    One process may have a directory open for writing (a second one gets
    :class:`~rocketstore.exceptions.StoreLockedError`). The handle is thread-safe and releases
    the GIL while it does I/O. It belongs to the process that opened it: in a forked child
    (a PySpark worker) it raises :class:`~rocketstore.exceptions.StoreForkedError`, so open
    stores inside the task, in a ``with`` block.

    Example::

        import rocketstore

        with rocketstore.MessageStore("/tmp/demo-store") as store:
            r = store.put("TopicTest", b"hello", tags="TagA", keys=["order-1"])
            msg = store.look_message_by_offset(r.commitlog_offset)
            assert msg.body == b"hello"

            import pyarrow as pa

            table = pa.table({"topic": ["TopicTest"] * 3, "body": [b"a", b"b", b"c"]})
            results = store.put_batch(table)  # a pyarrow.RecordBatch, one row per message
            print(results.column("commitlog_offset"))
    """

    __slots__ = ()

    def put(
        self,
        topic: str,
        body: bytes | bytearray | memoryview,
        *,
        queue_id: int | None = None,
        queue_selector: _queues.QueueSelector = "hash",
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
    ) -> _native.PutResult:
        """Puts one message and returns its :class:`PutResult` (see the native ``put`` for the
        message arguments).

        Without ``queue_id`` the message goes to one of the topic's queues, chosen by
        ``queue_selector`` as the Spark writer's ``queueSelector`` does: ``"hash"`` (default)
        by the CRC32 of its keys (joined by a space; no keys: round robin), ``"round_robin"``
        in turn. The topic's queue count is its ``writeQueueNums`` in ``config/topics.json``
        (:func:`rocketstore.set_topic_queue_nums`), else 1
        (:data:`rocketstore.DEFAULT_QUEUE_NUMS`: queue 0).

        Example::

            r = store.put("TopicTest", b"hello", tags="TagA", keys=["order-42"])
            # queue crc32(b"order-42") % the topic's queue count
            store.put("TopicTest", b"second queue", queue_id=1)
        """
        if queue_id is None:
            queue_id = _queues.choose(self.path, topic, keys, queue_selector)
        # Only the arguments given are passed on: each keyword the native call matches costs
        # more than the put of a small message itself.
        kw: dict[str, Any] = {}
        if tags is not None:
            kw["tags"] = tags
        if keys is not None:
            kw["keys"] = keys
        if properties is not None:
            kw["properties"] = properties
        if flag != 0:
            kw["flag"] = flag
        if born_timestamp is not None:
            kw["born_timestamp"] = born_timestamp
        if born_host is not None:
            kw["born_host"] = born_host
        if store_host is not None:
            kw["store_host"] = store_host
        if delay_level != 0:
            kw["delay_level"] = delay_level
        if transaction is not None:
            kw["transaction"] = transaction
        if prepared_transaction_offset != 0:
            kw["prepared_transaction_offset"] = prepared_transaction_offset
        if producer_group is not None:
            kw["producer_group"] = producer_group
        if compression is not None:
            kw["compression"] = compression
            kw["compress_level"] = compress_level
            kw["compress_over"] = compress_over
        return super().put(topic, body, queue_id=queue_id, **kw)

    @overload
    def put_batch(
        self,
        messages: pa.RecordBatch | pa.Table | ArrowStreamExportable | ArrowArrayExportable,
        *,
        compression: str | None = None,
        compress_level: int = 5,
        compress_over: int = 4096,
        queue_selector: _queues.QueueSelector = "hash",
    ) -> pa.RecordBatch: ...

    @overload
    def put_batch(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        compression: str | None = None,
        compress_level: int = 5,
        compress_over: int = 4096,
        queue_selector: _queues.QueueSelector = "hash",
    ) -> list[_native.PutResult]: ...

    def put_batch(
        self,
        messages: pa.RecordBatch
        | pa.Table
        | ArrowStreamExportable
        | ArrowArrayExportable
        | Iterable[Mapping[str, Any]],
        *,
        compression: str | None = None,
        compress_level: int = 5,
        compress_over: int = 4096,
        queue_selector: _queues.QueueSelector = "hash",
    ) -> pa.RecordBatch | list[_native.PutResult]:
        """Puts many messages at once, under one acquisition of the write lock.

        ``messages`` is either

        * a list of dicts whose keys are :meth:`put`'s argument names (``topic`` and ``body``
          required); returns a list of :class:`PutResult`, or
        * Arrow data: any object with ``__arrow_c_stream__`` or ``__arrow_c_array__`` (Arrow's
          PyCapsule interface: a ``pyarrow.RecordBatch``, ``Table`` or ``RecordBatchReader``,
          a polars ``DataFrame``, a DuckDB relation, ...) whose columns are named like :meth:`put`'s
          arguments (``topic`` and ``body`` required): ``topic``/``tags``/``born_host``/
          ``store_host`` string, ``body`` binary (or string), ``queue_id``/``flag`` integer,
          ``keys`` string (space-separated keys) or list<string>, ``properties``
          map<string, string>, ``born_timestamp`` int64 epoch milliseconds or a timestamp,
          ``delay_level``/``prepared_transaction_offset`` integer, ``transaction`` string
          (``"prepared"``, ``"commit"``, ``"rollback"`` or null).
          Nulls mean "not given" (except in ``topic`` and ``body``). Returns a
          ``pyarrow.RecordBatch`` with one row per message and the columns ``status``
          (dictionary<int8, string>), ``msg_id`` (string), ``commitlog_offset`` (int64),
          ``queue_offset`` (int64), ``wrote_bytes`` (int32) and ``store_timestamp`` (int64).
          Rows are read from the producer's Arrow buffers in place (no copy, no Python object
          per row) and written with the GIL released; a stream is read whole first.

        ``compression`` (``"lz4"``, ``"zstd"`` or ``"zlib"``; default ``None``: bodies are stored
        as given) compresses every body of at least ``compress_over`` bytes (default 4096,
        RocketMQ's ``compressMsgBodyOverHowmuch``) as a RocketMQ producer does, at
        ``compress_level`` (default 5, RocketMQ's ``compressLevel``; zlib 0-9, zstd 1-22,
        ignored by LZ4). The record then has SYSFLAG bit 0 and the codec's type in bits 8-10,
        and RocketMQ consumers decompress its body; :func:`rocketstore.decompress_body` does the
        same for bodies read here. A body whose compressed form is not smaller is stored as
        given. An unknown codec or a level out of range raises
        :class:`~rocketstore.exceptions.InvalidConfigError` before anything is written.

        A message without ``queue_id`` (a missing key, ``None``, a missing column or a null)
        goes to a queue of its topic chosen by ``queue_selector``, as :meth:`put` does.

        The batch is validated whole before anything is written: if a message is invalid,
        :class:`~rocketstore.exceptions.InvalidMessageError` names its index and nothing is
        written.

        Performance: Arrow batches of 10,000 to 50,000 rows are the fastest per message (the
        working memory stays small). A million-row table is written as one batch, validated
        whole, which needs a few hundred MB of working memory; if all-or-nothing is not
        needed, ``for b in table.to_batches(max_chunksize=16_384): store.put_batch(b)`` is
        about 1.5x faster.

        Example::

            results = store.put_batch(
                [
                    {"topic": "TopicTest", "body": b"a", "tags": "TagA"},
                    {"topic": "TopicTest", "body": b"b", "queue_id": 1, "keys": ["k2"]},
                ]
            )

            table = pa.table(
                {
                    "topic": ["TopicTest", "TopicTest"],
                    "body": [b"a", b"b"],
                    "keys": [["k1"], ["k2", "k3"]],
                    "properties": pa.array(
                        [[("source", "web")], None], pa.map_(pa.string(), pa.string())
                    ),
                }
            )
            batch = store.put_batch(table)
            assert batch.column("status").to_pylist() == ["PUT_OK", "PUT_OK"]
        """
        if _is_arrow(messages):
            messages = _queues.fill_arrow_any(self.path, messages, queue_selector)
            return self._put_arrow(
                messages,
                compression=compression,
                compress_level=compress_level,
                compress_over=compress_over,
            )
        return super().put_batch(
            _queues.fill_dicts(self.path, messages, queue_selector),
            compression=compression,
            compress_level=compress_level,
            compress_over=compress_over,
        )

    def read_arrow(
        self,
        from_offset: int = 0,
        *,
        max_messages: int = 65536,
        end_offset: int | None = None,
        verify_crc: bool = False,
        max_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        columns: Sequence[str] | None = None,
        topic: str | None = None,
        tags: str | None = None,
        decompress: bool = False,
    ) -> tuple[pa.RecordBatch, int]:
        """Reads messages in commit log order as a ``pyarrow.RecordBatch``.

        Returns ``(batch, next_offset)``: up to ``max_messages`` records whose commit log
        offset lies in ``[from_offset, end_offset)`` (``end_offset=None``: to the end of the
        data), with the schema :data:`rocketstore.MESSAGE_SCHEMA`, and the offset to continue
        from. At the end the batch is empty and ``next_offset == from_offset``.
        A batch also ends before the record that would take its stored bytes (the sum of
        ``store_size``) past ``max_bytes`` (like RocketMQ's ``maxTransferBytesOnMessageInMemory``
        for a pull; default :data:`DEFAULT_MAX_BATCH_BYTES`, 8 MiB; range 0 to 2**63 - 1) but
        always holds at least one record, so loop until the batch is empty. Batches of a few MiB
        are the fastest: their column buffers return to a bounded pool when the batch is
        freed and are reused by the next call, where fresh memory is faulted in and zeroed.
        ``from_offset`` must be a record boundary (0 or any ``commitlog_offset``/``next_offset``;
        offsets below the oldest stored record start at the oldest). The columns are built in
        Rust straight from the store's files, with the GIL released (no Python object per row).

        With ``verify_crc=True`` every body CRC is checked, and a mismatch raises
        :class:`~rocketstore.exceptions.CorruptionError` naming the file and offset.

        ``columns`` (names of :data:`rocketstore.MESSAGE_SCHEMA`, in the order wanted) builds
        only those columns: ``columns=["body"]`` copies the bodies and nothing else (the
        other nineteen columns cost nothing). ``topic`` and ``tags`` (``"TagA || TagB"``, as
        :meth:`get_message`) keep only matching records; the others are skipped before any of
        their columns is built and do not count towards ``max_messages`` or ``max_bytes``.
        ``decompress=True`` returns compressed bodies decompressed (their ``sys_flag``
        compression bits cleared), as RocketMQ consumers see them. :meth:`read_arrow_batches`
        does the offset loop.

        Example::

            offset = 0
            while True:
                batch, offset = store.read_arrow(offset, max_messages=10_000)
                if batch.num_rows == 0:
                    break
                print(batch.column("topic"), batch.column("body"))

            bodies, _ = store.read_arrow(0, columns=["body"], topic="TopicTest", tags="TagA")
        """
        names = _columns(columns)
        asked = names
        if decompress and names is not None and "body" in names and "sys_flag" not in names:
            asked = [*names, "sys_flag"]
        batch, next_offset = self._read_log_columns(
            from_offset,
            _count("max_messages", max_messages),
            end_offset,
            verify_crc,
            _count("max_bytes", max_bytes),
            asked,
            topic,
            tags,
        )
        if decompress and (names is None or "body" in names):
            batch = _decompress_batch(batch)
        return _select(batch, names), next_offset

    def read_arrow_batches(
        self,
        from_offset: int = 0,
        *,
        end_offset: int | None = None,
        columns: Sequence[str] | None = None,
        topic: str | None = None,
        tags: str | None = None,
        max_messages: int = 65536,
        max_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        verify_crc: bool = False,
        decompress: bool = False,
    ) -> pa.RecordBatchReader:
        """:meth:`read_arrow` as a ``pyarrow.RecordBatchReader``: the batches from
        ``from_offset`` to ``end_offset`` (``None``: the end of the data when each batch is
        read), the offset loop done for you. ``reader.read_all()`` is a ``pyarrow.Table``;
        the reader is also an Arrow stream (``__arrow_c_stream__``) that polars, DuckDB or
        ``put_batch`` take. Arguments as :meth:`read_arrow`; every batch has the schema of
        ``columns`` (``reader.schema``) and at least one row.

        Example::

            table = store.read_arrow_batches(columns=["topic", "body"]).read_all()
            for batch in store.read_arrow_batches(topic="TopicTest", tags="TagA"):
                handle(batch)
        """
        import pyarrow

        names = _columns(columns)

        def batches() -> Iterator[pa.RecordBatch]:
            offset = from_offset
            while True:
                batch, offset = self.read_arrow(
                    offset,
                    max_messages=max_messages,
                    end_offset=end_offset,
                    verify_crc=verify_crc,
                    max_bytes=max_bytes,
                    columns=names,
                    topic=topic,
                    tags=tags,
                    decompress=decompress,
                )
                if batch.num_rows == 0:
                    return
                yield batch

        return pyarrow.RecordBatchReader.from_batches(_projected_schema(names), batches())

    def get_message_arrow(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_messages: int = 65536,
        *,
        end_offset: int | None = None,
        verify_crc: bool = False,
        tags: str | None = None,
        max_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        columns: Sequence[str] | None = None,
        decompress: bool = False,
    ) -> tuple[pa.RecordBatch, int]:
        """Reads one queue's messages, through its consume queue, as a ``pyarrow.RecordBatch``.

        Returns ``(batch, next_queue_offset)``: up to ``max_messages`` messages with queue
        offsets in ``[offset, end_offset)`` (clamped to the queue's ``[min, max)``), in queue
        order, with the schema :data:`rocketstore.MESSAGE_SCHEMA`, and the queue offset to
        continue from. ``tags`` filters like :meth:`get_message` (``"TagA || TagB"``); entries
        whose commit log record was already deleted are skipped. ``max_bytes`` bounds the
        batch's stored bytes like :meth:`read_arrow` (at least one message per batch). An
        empty batch means the range is exhausted. ``verify_crc=True`` checks every body CRC
        (:class:`~rocketstore.exceptions.CorruptionError` on a mismatch).

        ``columns`` builds only the named columns of :data:`rocketstore.MESSAGE_SCHEMA`, in
        that order (``columns=["body"]``: the bodies and nothing else); the ``tags`` filter
        drops messages before any of their columns is built. ``decompress=True`` returns
        compressed bodies decompressed. :meth:`get_message_arrow_batches` does the offset
        loop.

        Example::

            offset = store.min_offset_in_queue("TopicTest", 0)
            end = store.max_offset_in_queue("TopicTest", 0)
            while offset < end:
                batch, offset = store.get_message_arrow("TopicTest", 0, offset, end_offset=end)
                if batch.num_rows == 0:
                    break
                handle(batch)

            bodies, _ = store.get_message_arrow("TopicTest", 0, 0, columns=["body"])
        """
        names = _columns(columns)
        asked = names
        if decompress and names is not None and "body" in names and "sys_flag" not in names:
            asked = [*names, "sys_flag"]
        batch, next_offset = self._read_queue_columns(
            topic,
            queue_id,
            offset,
            _count("max_messages", max_messages),
            end_offset,
            verify_crc,
            tags,
            _count("max_bytes", max_bytes),
            asked,
        )
        if decompress and (names is None or "body" in names):
            batch = _decompress_batch(batch)
        return _select(batch, names), next_offset

    def get_message_arrow_batches(
        self,
        topic: str,
        queue_id: int,
        offset: int | None = None,
        *,
        end_offset: int | None = None,
        columns: Sequence[str] | None = None,
        tags: str | None = None,
        max_messages: int = 65536,
        max_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        verify_crc: bool = False,
        decompress: bool = False,
    ) -> pa.RecordBatchReader:
        """:meth:`get_message_arrow` as a ``pyarrow.RecordBatchReader``: one queue from
        ``offset`` (``None``: its first offset) to ``end_offset`` (``None``: its end when each
        batch is read), the offset loop done for you; ``reader.read_all()`` is a
        ``pyarrow.Table``. Arguments as :meth:`get_message_arrow`.

        Example::

            bodies = store.get_message_arrow_batches("TopicTest", 0, columns=["body"]).read_all()
        """
        import pyarrow

        names = _columns(columns)
        start = self.min_offset_in_queue(topic, queue_id) if offset is None else offset

        def batches() -> Iterator[pa.RecordBatch]:
            at = start
            while True:
                batch, at = self.get_message_arrow(
                    topic,
                    queue_id,
                    at,
                    max_messages,
                    end_offset=end_offset,
                    verify_crc=verify_crc,
                    tags=tags,
                    max_bytes=max_bytes,
                    columns=names,
                    decompress=decompress,
                )
                if batch.num_rows == 0:
                    return
                yield batch

        return pyarrow.RecordBatchReader.from_batches(_projected_schema(names), batches())

    def to_table(
        self,
        topic: str | None = None,
        queue_id: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        tags: str | None = None,
        decompress: bool = False,
    ) -> pa.Table:
        """Every message as a ``pyarrow.Table`` (schema :data:`rocketstore.MESSAGE_SCHEMA`, or
        ``columns``): the whole commit log in order, or the messages of ``topic`` (and
        ``tags``), or with ``queue_id`` one queue through its consume queue, in queue order.
        :meth:`read_arrow_batches` / :meth:`get_message_arrow_batches` stream the same
        batches without holding them all.

        Example::

            orders = store.to_table("orders", columns=["queue_id", "queue_offset", "body"])
            q0 = store.to_table("orders", 0, columns=["body"])
        """
        if queue_id is not None:
            if topic is None:
                raise TypeError("to_table: queue_id needs a topic")
            reader = self.get_message_arrow_batches(
                topic, queue_id, columns=columns, tags=tags, decompress=decompress
            )
        else:
            reader = self.read_arrow_batches(
                columns=columns, topic=topic, tags=tags, decompress=decompress
            )
        return reader.read_all()

    def read_consume_queue(
        self, topic: str, queue_id: int, offset: int = 0, max_units: int = 65536
    ) -> pa.RecordBatch:
        """Up to ``max_units`` consume queue units of a queue from queue ``offset`` (raised to
        the queue's first offset), as a ``pyarrow.RecordBatch`` with the columns ``topic``,
        ``queue_id``, ``queue_offset``, ``commitlog_offset``, ``size`` and ``tags_code``
        (:data:`rocketstore._arrow.CONSUME_QUEUE_SCHEMA`). Empty for an unknown queue.

        Example::

            units = store.read_consume_queue("TopicTest", 0)
            assert units.column("queue_offset").to_pylist() == list(range(units.num_rows))
        """
        return self._read_cq_columns(topic, queue_id, offset, _count("max_units", max_units))

    def read_index(self) -> pa.RecordBatch:
        """Every entry of every index file, oldest file first, as a ``pyarrow.RecordBatch``
        with the columns ``file``, ``file_begin_timestamp``, ``slot`` (``key_hash % slots``),
        ``entry`` (its number in the file, from 1), ``key_hash``, ``commitlog_offset``,
        ``time_diff_s`` (seconds after the file's begin timestamp) and ``prev_index`` (the
        previous entry of the same slot chain, 0 at the end)
        (:data:`rocketstore._arrow.INDEX_SCHEMA`). Empty when the index is disabled.

        Example::

            index = store.read_index()
            print(index.num_rows, "index entries in", len(set(index.column("file").to_pylist())))
        """
        return self._read_index_columns()
