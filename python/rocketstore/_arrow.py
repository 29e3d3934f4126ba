"""Arrow for ``MessageStore``: the schemas of the Arrow batches and the put columns.

Arrow crosses the boundary through Arrow's PyCapsule interface (``__arrow_c_stream__``,
``__arrow_c_array__``, ``__arrow_c_schema__``): ``put_batch`` takes any object that has one
of the first two (a pyarrow ``Table``, ``RecordBatch`` or ``RecordBatchReader``, a polars
``DataFrame``, a DuckDB relation, ...), and the native module reads its buffers in place; the
reads hand their batches back the same way, built in Rust straight from the store's files.
Every schema is defined once, in Rust; this module only exposes them as ``pyarrow.Schema``.
"""

from __future__ import annotations

import pyarrow as pa

from rocketstore import _native

__all__ = [
    "COLUMNS",
    "CONSUME_QUEUE_SCHEMA",
    "INDEX_SCHEMA",
    "MESSAGE_SCHEMA",
    "RESULT_SCHEMA",
]

#: The columns put_batch accepts (put()'s argument names), as the native module defines them.
COLUMNS: tuple[str, ...] = _native.PUT_COLUMNS
#: The put columns that hold text.
_TEXT_COLUMNS = ("topic", "tags", "born_host", "store_host", "transaction")

#: Schema of the RecordBatch put_batch returns for Arrow input: ``status``
#: (dictionary<int8, string>), ``msg_id``, ``commitlog_offset``, ``queue_offset``,
#: ``wrote_bytes``, ``store_timestamp``.
RESULT_SCHEMA: pa.Schema = _native.arrow_schema("put_result")

#: Schema of the message batches ``read_arrow`` and ``get_message_arrow`` return.
#:
#: ``tags``, ``keys`` (the raw ``KEYS`` property: keys separated by spaces) and ``uniq_key`` are
#: null when the message has none; ``properties`` holds every stored property (including
#: ``TAGS``, ``KEYS`` and ``UNIQ_KEY``); ``msg_id`` is the offset message id.
MESSAGE_SCHEMA: pa.Schema = _native.arrow_schema("message")

#: Schema of ``read_consume_queue`` batches: one row per 20-byte consume queue unit.
CONSUME_QUEUE_SCHEMA: pa.Schema = _native.arrow_schema("consume_queue")

#: Schema of ``read_index`` batches: one row per index entry of every index file.
INDEX_SCHEMA: pa.Schema = _native.arrow_schema("index")
