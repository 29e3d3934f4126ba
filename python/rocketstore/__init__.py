"""rocketstore: a message store byte-compatible with Apache RocketMQ's on-disk store.

A store is a directory of commit log files in RocketMQ's format; a broker can load what this
package writes, and this package can read (``read_only=True``) what a broker wrote.

Example::

    import rocketstore

    with rocketstore.MessageStore("/tmp/demo-store") as store:
        r = store.put("TopicTest", b"hello", tags="TagA", keys=["order-1"])
        print(r.status, r.msg_id, r.commitlog_offset)

        for msg in store.scan():
            print(msg.topic, msg.queue_id, msg.queue_offset, msg.body)

Main names:

* :class:`MessageStore`: open a store; ``put``, ``put_batch`` (dicts or Arrow),
  ``look_message_by_offset``, ``scan``, ``flush``, ``close``; the read path ``get_message``,
  ``pull`` (long polling), ``query_message`` / ``query_messages`` (by key, one or many),
  ``view_message_by_id``, consumer offsets; and
  the Arrow reads ``read_arrow``, ``get_message_arrow``, ``read_consume_queue``,
  ``read_index``.
* :class:`PutResult` (with :class:`PutMessageStatus`), :class:`Message`, :class:`GetResult`
  (with :class:`GetMessageStatus`): what writes return and reads yield.
* :data:`MESSAGE_SCHEMA`: the ``pyarrow.Schema`` of the Arrow message batches (importing it
  imports pyarrow).
* :func:`config_fields`: every configuration keyword with its default and range.
* :func:`compress_body` / :func:`decompress_body`: bodies as RocketMQ's producers compress
  them and its consumers decompress them (``put_batch(..., compression="lz4")`` compresses
  on write; reads return bodies as stored, with their ``sys_flag``).
* :func:`rebuild_indexes`: offline repair, rewrites consume queues and index files of a
  closed store from its commit log.
* :func:`truncate_store`: cuts a closed store's commit log, consume queues and index back to a
  record boundary (RocketMQ's ``truncateDirtyFiles``).
* :func:`verify_store`: every check of one closed store (CRC, framing, consume queues, gaps,
  index, manifest entry) in one native call, returning a :class:`StoreReport`.
* :mod:`rocketstore.exceptions`: the exception tree (root :class:`MessageStoreError`).

The command line tool ``rocketstore`` (``rocketstore --help``) runs a demo and inspects stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketstore import exceptions
from rocketstore._native import (
    ConfigField,
    GetResult,
    Message,
    PutResult,
    ScanIterator,
    StoreCheck,
    StoreReport,
    __version__,
    compress_body,
    config_fields,
    decompress_body,
    rebuild_indexes,
    truncate_store,
    verify_store,
)
from rocketstore._queues import DEFAULT_QUEUE_NUMS, set_topic_queue_nums, topic_queue_nums
from rocketstore._status import GetMessageStatus, PutMessageStatus
from rocketstore._store import MessageStore
from rocketstore.consumer import Consumer, read_consumer_offsets
from rocketstore.exceptions import (
    CommitConflictError,
    CorruptionError,
    DiskFullError,
    InvalidConfigError,
    InvalidMessageError,
    MessageStoreError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    StoreClosedError,
    StoreForkedError,
    StoreIOError,
    StoreLockedError,
    StorePoisonedError,
    StoreReadOnlyError,
    UnsupportedFormatError,
    UnsupportedRootError,
)

if TYPE_CHECKING:
    from rocketstore._arrow import MESSAGE_SCHEMA as MESSAGE_SCHEMA

__all__ = [
    "DEFAULT_QUEUE_NUMS",
    "MESSAGE_SCHEMA",
    "CommitConflictError",
    "ConfigField",
    "Consumer",
    "CorruptionError",
    "DiskFullError",
    "GetMessageStatus",
    "GetResult",
    "InvalidConfigError",
    "InvalidMessageError",
    "Message",
    "MessageStore",
    "MessageStoreError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "PutMessageStatus",
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
    "UnsupportedRootError",
    "__version__",
    "compress_body",
    "config_fields",
    "decompress_body",
    "exceptions",
    "read_consumer_offsets",
    "rebuild_indexes",
    "set_topic_queue_nums",
    "topic_queue_nums",
    "truncate_store",
    "verify_store",
]


def __getattr__(name: str) -> Any:
    # MESSAGE_SCHEMA is a pyarrow object: pyarrow is imported only when it is first used.
    if name == "MESSAGE_SCHEMA":
        from rocketstore._arrow import MESSAGE_SCHEMA

        return MESSAGE_SCHEMA
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
