"""RocketMQ's ``GetMessageStatus`` and ``PutMessageStatus`` as Python enums (the native module
returns their members)."""

from __future__ import annotations

import enum

__all__ = ["GetMessageStatus", "PutMessageStatus"]


class GetMessageStatus(enum.StrEnum):
    """RocketMQ's ``GetMessageStatus``: what a ``get_message`` or ``pull`` found.

    A ``str`` enum: each member equals its RocketMQ name (``GetMessageStatus.FOUND == "FOUND"``).

    * ``FOUND``: messages were returned.
    * ``NO_MATCHED_MESSAGE``: queue entries were scanned but none matched the ``tags``
      expression (``next_begin_offset`` moved past them).
    * ``MESSAGE_WAS_REMOVING``: the first needed commit log record was already deleted.
    * ``OFFSET_FOUND_NULL``: the consume queue entry at the offset could not be read (its
      file is gone); ``next_begin_offset`` points at the next consume queue file.
    * ``OFFSET_OVERFLOW_BADLY``: the offset is beyond the queue's end.
    * ``OFFSET_OVERFLOW_ONE``: the offset is exactly the queue's end (nothing new yet).
    * ``OFFSET_TOO_SMALL``: the offset is below the queue's first offset.
    * ``NO_MATCHED_LOGIC_QUEUE``: the queue does not exist (broker layer; the store reports an
      unknown queue as ``NO_MESSAGE_IN_QUEUE``, as RocketMQ 5's store does).
    * ``NO_MESSAGE_IN_QUEUE``: the queue holds no message.
    * ``OFFSET_RESET``: the consumer must reset its offset (broker layer; never returned by the
      store).

    Example::

        r = store.get_message("TopicTest", 0, offset)
        if r.status is GetMessageStatus.OFFSET_TOO_SMALL:
            offset = r.next_begin_offset  # the queue's first offset
    """

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_RESET = "OFFSET_RESET"


class PutMessageStatus(enum.StrEnum):
    """RocketMQ's ``PutMessageStatus``: what a ``put`` did (``PutResult.status``).

    A ``str`` enum: each member equals its RocketMQ name (``PutMessageStatus.PUT_OK ==
    "PUT_OK"``), as ``put_batch``'s Arrow ``status`` column spells it.

    * ``PUT_OK``: written (and, under ``SYNC_FLUSH``, flushed).
    * ``FLUSH_DISK_TIMEOUT``: written, but the synchronous flush did not finish within
      ``sync_flush_timeout``: not known to be durable yet.
    * ``FLUSH_SLAVE_TIMEOUT``, ``SLAVE_NOT_AVAILABLE``: replication (never returned by a
      standalone store).
    * ``SERVICE_NOT_AVAILABLE``: the store does not accept writes (disk full, shutting down).
    * ``CREATE_MAPPED_FILE_FAILED``: the next commit log file could not be created; nothing
      was written.
    * ``MESSAGE_ILLEGAL``, ``PROPERTIES_SIZE_EXCEEDED``: the message was refused.
    * ``OS_PAGE_CACHE_BUSY``: the put lock was held too long.
    * ``UNKNOWN_ERROR``: anything else.

    Example::

        r = store.put("TopicTest", b"x")
        if r.status is not PutMessageStatus.PUT_OK:
            log.warning("put returned %s", r.status)
    """

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
