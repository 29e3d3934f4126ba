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
  ``look_message_by_offset``, ``scan``, ``flush``, ``close``.
* :class:`PutResult`, :class:`Message`: what writes return and reads yield.
* :func:`config_fields`: every configuration keyword with its default and range.
* :mod:`rocketstore.exceptions`: the exception tree (root :class:`MessageStoreError`).

The command line tool ``rocketstore`` (``rocketstore --help``) runs a demo and inspects stores.
"""

from __future__ import annotations

from rocketstore import exceptions
from rocketstore._native import (
    ConfigField,
    Message,
    PutResult,
    ScanIterator,
    __version__,
    config_fields,
)
from rocketstore._store import MessageStore
from rocketstore.exceptions import (
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
)

__all__ = [
    "ConfigField",
    "CorruptionError",
    "DiskFullError",
    "InvalidConfigError",
    "InvalidMessageError",
    "Message",
    "MessageStore",
    "MessageStoreError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "PutResult",
    "ScanIterator",
    "StoreClosedError",
    "StoreForkedError",
    "StoreIOError",
    "StoreLockedError",
    "StorePoisonedError",
    "StoreReadOnlyError",
    "UnsupportedFormatError",
    "__version__",
    "config_fields",
    "exceptions",
]
