"""The exceptions rocketstore raises.

Every error the store raises derives from :class:`MessageStoreError`, so one ``except``
clause catches them all. Several classes also derive from a built-in exception, so code
that already handles ``OSError``, ``ValueError`` or ``IndexError`` keeps working::

    MessageStoreError(Exception)
    ├── StoreIOError(MessageStoreError, OSError)          .errno .filename .op
    │   └── DiskFullError(StoreIOError)
    ├── CorruptionError(MessageStoreError)                .file .offset .kind
    ├── StorePoisonedError(MessageStoreError)
    ├── StoreClosedError(MessageStoreError)
    ├── StoreLockedError(MessageStoreError)               .path
    ├── StoreReadOnlyError(MessageStoreError)             .path
    ├── OffsetOutOfRangeError(MessageStoreError, IndexError)  .requested .min .max
    ├── UnsupportedFormatError(MessageStoreError)         .path
    ├── StoreForkedError(MessageStoreError)
    ├── InvalidConfigError(MessageStoreError, ValueError) .key .suggestions
    │   └── UnsupportedRootError(InvalidConfigError)       .scheme .supported
    ├── CommitConflictError(MessageStoreError)            .path
    └── InvalidMessageError(MessageStoreError, ValueError)  .field
        └── MessageTooLargeError(InvalidMessageError)      .size .max .index

Arguments of the wrong Python type raise the built-in :class:`TypeError` (never one of
these). No rocketstore call raises ``pyo3_runtime.PanicException``.

The classes are defined here, in Python, so that they can inherit from two bases; the
native module raises them and sets the attributes listed above on each instance. The
attributes default to ``None`` (or an empty tuple) on instances created by hand.

Example::

    import rocketstore
    from rocketstore.exceptions import InvalidMessageError, MessageStoreError

    with rocketstore.MessageStore("/tmp/store") as store:
        try:
            store.put("bad topic!", b"x")
        except InvalidMessageError as e:
            print(e.field)  # "topic"
        except MessageStoreError:
            raise
"""

from __future__ import annotations

#: Raised by the Python layer only (store roots, remote commits): the native module, which
#: re-exports every class it raises, does not list them.
PYTHON_ONLY = ("CommitConflictError", "UnsupportedRootError")

__all__ = [
    "CommitConflictError",
    "CorruptionError",
    "DiskFullError",
    "InvalidConfigError",
    "InvalidMessageError",
    "MessageStoreError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "StoreClosedError",
    "StoreForkedError",
    "StoreIOError",
    "StoreLockedError",
    "StorePoisonedError",
    "StoreReadOnlyError",
    "UnsupportedFormatError",
    "UnsupportedRootError",
]


class MessageStoreError(Exception):
    """Root of every error rocketstore raises.

    Example::

        try:
            store.put("T", b"x")
        except rocketstore.MessageStoreError as e:
            log.error("store failed: %s", e)
    """


class StoreIOError(MessageStoreError, OSError):
    """A system call on a store file failed (open, mmap, msync, fallocate, ...).

    Also an :class:`OSError`: ``errno`` is the operating system's error number (or None),
    ``filename`` the file or directory it failed on, and ``op`` the operation's name.

    Example::

        try:
            MessageStore("/no/permission/here")
        except StoreIOError as e:
            print(e.op, e.errno, e.filename)
    """

    op: str | None = None

    def __str__(self) -> str:
        # OSError formats "[Errno N] strerror: filename" once errno is set; the native module
        # already put the operation, the path and the OS error into the message.
        if len(self.args) == 1 and isinstance(self.args[0], str):
            return self.args[0]
        return super().__str__()


class DiskFullError(StoreIOError):
    """The disk is full (ENOSPC), or above the configured usage limit.

    Retrying after space was freed may succeed without reopening the store.
    """


class CorruptionError(MessageStoreError):
    """Stored data is damaged where the store may not silently drop it.

    ``file`` is the damaged file, ``offset`` the offset of the damage (absolute commit log
    offset for commit log files) and ``kind`` a short description.
    """

    file: str | None = None
    offset: int | None = None
    kind: str | None = None


class StorePoisonedError(MessageStoreError):
    """An earlier failure (a failed flush, a crashed background thread) fenced the store.

    Nothing is written after such a failure. Close the store and open it again: recovery
    then starts from what is really on disk. The first failure is chained as
    ``__cause__`` when it is known.
    """


class StoreClosedError(MessageStoreError):
    """The store (or the iterator's store) was closed."""


class StoreLockedError(MessageStoreError):
    """Another process has the store open for writing (one writer per directory).

    ``path`` is the lock file. Open the store with ``read_only=True`` to read it meanwhile.
    """

    path: str | None = None


class StoreReadOnlyError(MessageStoreError):
    """The store was opened with ``read_only=True`` and the call would write.

    ``path`` is the store root.
    """

    path: str | None = None


class OffsetOutOfRangeError(MessageStoreError, IndexError):
    """A read asked for a commit log offset outside ``[min, max)``.

    Also an :class:`IndexError`. ``requested`` is the offset asked for, ``min`` the smallest
    stored offset and ``max`` one past the last readable byte.
    """

    requested: int | None = None
    min: int | None = None
    max: int | None = None


class UnsupportedFormatError(MessageStoreError):
    """The directory holds something this engine does not read.

    For example RocksDB consume queues, or files whose names or sizes are not those of a
    RocketMQ commit log. ``path`` is the offending path.
    """

    path: str | None = None


class StoreForkedError(MessageStoreError):
    """The store handle was opened in another process (it was inherited through fork).

    A store's background threads and lock do not survive ``fork()``. Open the store in the
    process that uses it, e.g. inside a PySpark task (``foreachPartition``), not on the
    driver.
    """


class InvalidConfigError(MessageStoreError, ValueError):
    """A configuration keyword is unknown, of the wrong type or out of range.

    Also a :class:`ValueError`. ``key`` is the configuration name and ``suggestions`` the
    known names closest to an unknown one.

    Example::

        try:
            MessageStore(path, max_mesage_size=1024)
        except InvalidConfigError as e:
            print(e.key, e.suggestions)  # max_mesage_size ('max_message_size',)
    """

    key: str | None = None
    suggestions: tuple[str, ...] = ()


class UnsupportedRootError(InvalidConfigError):
    """A store root is a URI whose scheme rocketstore does not serve (``ftp://``, ``s3n://``,
    ...), or a malformed URI of a scheme it serves.

    Raised before anything is read or written (for a Spark job: on the driver, before any task
    runs). ``scheme`` is the URI's scheme and ``supported`` the schemes that are served.

    Example::

        try:
            rocketstore.spark.verify_local("ftp://host/stores")
        except UnsupportedRootError as e:
            print(e.scheme, e.supported)  # ftp ('file', 's3', 's3a', 'gs', ...)
    """

    scheme: str | None = None
    supported: tuple[str, ...] = ()


class CommitConflictError(MessageStoreError):
    """Another job committed to the same remote root at the same time: this job's manifest
    version exists already (a conditional create failed). Nothing of this job is published;
    rerun it.
    """

    path: str | None = None


class InvalidMessageError(MessageStoreError, ValueError):
    """An argument failed validation; nothing was written.

    Also a :class:`ValueError`. ``field`` names the argument (``"topic"``, ``"queue_id"``,
    ``"properties"``, ...). In a batch, the message says which message (by index) failed,
    and the whole batch was refused.
    """

    field: str | None = None


class MessageTooLargeError(InvalidMessageError):
    """A body, the encoded properties or the whole record is larger than allowed.

    ``size`` is its size in bytes and ``max`` the limit; ``field`` is ``"body"``,
    ``"properties"`` or ``"record"``; ``index`` is the message's position in a ``put_batch``
    of several messages (None for a single message).
    """

    size: int | None = None
    max: int | None = None
    index: int | None = None
