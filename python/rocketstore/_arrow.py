"""Arrow for ``MessageStore``: ``put_batch`` input, and the Arrow reads.

Input (``put_batch``): columns in, raw buffers across, results out.

Each input column is normalized with pyarrow (chunks combined, cast to one canonical type)
and described to the native module as raw buffers (``bytes``) plus its validity bitmap and
offsets; the native module reads the rows straight from those buffers (no Python object per
row), writes the whole batch with the GIL released, and returns the result columns as raw
buffers, which are wrapped here with ``pa.Array.from_buffers`` (no copy).

Descriptor formats (all integers in native byte order, as Arrow keeps them in memory):

* ``("binary", offsets, data, validity, bit_offset)``: ``offsets`` holds ``n + 1`` int64
  values relative to ``offsets[0]``; ``data`` holds exactly the bytes they span.
* ``("int64", values, validity, bit_offset)``: ``n`` int64 values.
* ``("list", offsets, validity, bit_offset, child)`` and
  ``("map", offsets, validity, bit_offset, keys, values)``: int64 offsets into binary
  children that hold exactly the elements the offsets span.

``validity`` is ``None`` (no nulls) or the bytes of an Arrow validity bitmap in which bit
``bit_offset + i`` is row ``i``.

Output of the reads (``read_arrow``, ``get_message_arrow``, ``read_consume_queue``,
``read_index``): the native module decodes the records straight from the store's mapping into
column buffers with the GIL released and hands them over as ``bytes``: a fixed-width column
as one buffer of values, a string/binary column as ``(validity, int32 offsets, data)``, the
``properties`` map as ``(int32 offsets, key offsets, key data, value offsets, value data)``.
They are wrapped here with ``pa.Array.from_buffers`` (no Python object per row).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from rocketstore.exceptions import InvalidMessageError

if TYPE_CHECKING:
    from rocketstore._native import MessageStore as _NativeStore

__all__ = [
    "CONSUME_QUEUE_SCHEMA",
    "INDEX_SCHEMA",
    "MESSAGE_SCHEMA",
    "RESULT_SCHEMA",
    "consume_queue_batch",
    "index_batch",
    "message_batch",
    "put_arrow",
]

#: The columns put_batch accepts (put()'s argument names).
COLUMNS = (
    "topic",
    "body",
    "queue_id",
    "tags",
    "keys",
    "properties",
    "flag",
    "born_timestamp",
    "born_host",
    "store_host",
    "delay_level",
    "transaction",
    "prepared_transaction_offset",
)
_TEXT_COLUMNS = ("topic", "tags", "born_host", "store_host", "transaction")
_INT_COLUMNS = ("queue_id", "flag", "delay_level", "prepared_transaction_offset")

#: Schema of the RecordBatch put_batch returns for Arrow input.
RESULT_SCHEMA = pa.schema(
    [
        pa.field("status", pa.dictionary(pa.int8(), pa.string()), nullable=False),
        pa.field("msg_id", pa.string(), nullable=False),
        pa.field("commitlog_offset", pa.int64(), nullable=False),
        pa.field("queue_offset", pa.int64(), nullable=False),
        pa.field("wrote_bytes", pa.int32(), nullable=False),
        pa.field("store_timestamp", pa.int64(), nullable=False),
    ]
)

_TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")

#: Schema of the message batches ``read_arrow`` and ``get_message_arrow`` return.
#:
#: ``tags``, ``keys`` (the raw ``KEYS`` property: keys separated by spaces) and ``uniq_key`` are
#: null when the message has none; ``properties`` holds every stored property (including
#: ``TAGS``, ``KEYS`` and ``UNIQ_KEY``); ``msg_id`` is the offset message id.
_MESSAGE_FIELDS: list[pa.Field[Any]] = [
    pa.field("topic", pa.string(), nullable=False),
    pa.field("queue_id", pa.int32(), nullable=False),
    pa.field("queue_offset", pa.int64(), nullable=False),
    pa.field("commitlog_offset", pa.int64(), nullable=False),
    pa.field("store_size", pa.int32(), nullable=False),
    pa.field("body", pa.binary(), nullable=False),
    pa.field("body_crc", pa.int32(), nullable=False),
    pa.field("flag", pa.int32(), nullable=False),
    pa.field("sys_flag", pa.int32(), nullable=False),
    pa.field("tags", pa.string()),
    pa.field("keys", pa.string()),
    pa.field("properties", pa.map_(pa.string(), pa.string()), nullable=False),
    pa.field("born_timestamp", _TIMESTAMP_MS, nullable=False),
    pa.field("born_host", pa.string(), nullable=False),
    pa.field("store_timestamp", _TIMESTAMP_MS, nullable=False),
    pa.field("store_host", pa.string(), nullable=False),
    pa.field("reconsume_times", pa.int32(), nullable=False),
    pa.field("prepared_transaction_offset", pa.int64(), nullable=False),
    pa.field("msg_id", pa.string(), nullable=False),
    pa.field("uniq_key", pa.string()),
]
MESSAGE_SCHEMA = pa.schema(_MESSAGE_FIELDS)

#: Schema of ``read_consume_queue`` batches: one row per 20-byte consume queue unit.
_CONSUME_QUEUE_FIELDS: list[pa.Field[Any]] = [
    pa.field("topic", pa.string(), nullable=False),
    pa.field("queue_id", pa.int32(), nullable=False),
    pa.field("queue_offset", pa.int64(), nullable=False),
    pa.field("commitlog_offset", pa.int64(), nullable=False),
    pa.field("size", pa.int32(), nullable=False),
    pa.field("tags_code", pa.int64(), nullable=False),
]
CONSUME_QUEUE_SCHEMA = pa.schema(_CONSUME_QUEUE_FIELDS)

#: Schema of ``read_index`` batches: one row per index entry of every index file.
_INDEX_FIELDS: list[pa.Field[Any]] = [
    pa.field("file", pa.string(), nullable=False),
    pa.field("file_begin_timestamp", _TIMESTAMP_MS, nullable=False),
    pa.field("slot", pa.int32(), nullable=False),
    pa.field("entry", pa.int32(), nullable=False),
    pa.field("key_hash", pa.int32(), nullable=False),
    pa.field("commitlog_offset", pa.int64(), nullable=False),
    pa.field("time_diff_s", pa.int32(), nullable=False),
    pa.field("prev_index", pa.int32(), nullable=False),
]
INDEX_SCHEMA = pa.schema(_INDEX_FIELDS)

_Descriptor = tuple[Any, ...]


def _error(field: str, message: str) -> InvalidMessageError:
    err = InvalidMessageError(f"invalid {field}: {message}")
    err.field = field
    return err


def _is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_text(t.value_type)
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_binary(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_binary(t.value_type)
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary_view(t)
        or _is_text(t)
    )


def _is_list_of_text(t: pa.DataType) -> bool:
    return bool(
        (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t))
        and _is_text(t.value_type)
    )


def _single(column: Any) -> Any:
    """One contiguous array (chunks combined; zero-copy when there is one chunk)."""
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 1:
            return column.chunk(0)
        return column.combine_chunks()
    return column


def _cast(name: str, array: Any, target: pa.DataType) -> Any:
    try:
        return pc.cast(array, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        msg = f"column of type {array.type} cannot be converted to {target}: {e}"
        raise _error(name, msg) from None


def _validity(array: Any) -> tuple[bytes | None, int]:
    if array.null_count == 0:
        return None, 0
    bitmap = array.buffers()[0]
    start, bit = divmod(array.offset, 8)
    return bitmap.slice(start, (bit + len(array) + 7) // 8).to_pybytes(), bit


def _fixed(array: Any, width: int) -> bytes:
    """The values buffer of a fixed-width array, exactly ``len(array)`` values."""
    buf: pa.Buffer | None = array.buffers()[1]
    if buf is None or len(array) == 0:
        return b""
    return buf.slice(array.offset * width, len(array) * width).to_pybytes()


def _binary(array: Any) -> _Descriptor:
    """A large_binary or large_string array as a ``binary`` descriptor."""
    n = len(array)
    validity, bit = _validity(array)
    if n == 0:
        return ("binary", (0).to_bytes(8, "little"), b"", None, 0)
    buffers = array.buffers()
    offsets_buf, data_buf = buffers[1], buffers[2]
    offsets = offsets_buf.slice(array.offset * 8, (n + 1) * 8)
    view = memoryview(offsets).cast("q")
    first, last = view[0], view[n]
    view.release()
    data = b"" if data_buf is None or last == first else data_buf.slice(first, last - first)
    return (
        "binary",
        offsets.to_pybytes(),
        data if isinstance(data, bytes) else data.to_pybytes(),
        validity,
        bit,
    )


def _nested_offsets(offsets: Any) -> tuple[bytes, int, int]:
    """int64 offsets of a list or map array, and the child range they span."""
    offsets64 = offsets.cast(pa.int64())
    n = len(offsets64)
    first = offsets64[0].as_py() if n else 0
    last = offsets64[n - 1].as_py() if n else 0
    return _fixed(offsets64, 8), first, last


def _text_descriptor(name: str, column: Any) -> _Descriptor:
    if not _is_text(column.type):
        raise TypeError(f"column {name!r} must be a string column, not {column.type}")
    return _binary(_cast(name, column, pa.large_string()))


def _int_descriptor(name: str, column: Any) -> _Descriptor:
    t = column.type
    if pa.types.is_timestamp(t) and name == "born_timestamp":
        raw = _cast(name, column, pa.int64())
        scale = {"s": -1000, "ms": 1, "us": 1000, "ns": 1_000_000}[t.unit]
        if scale < 0:
            raw = pc.multiply_checked(raw, -scale)
        elif scale > 1:
            raw = pc.divide(raw, scale)
        column = raw
    elif not pa.types.is_integer(t):
        kind = "an integer or timestamp" if name == "born_timestamp" else "an integer"
        raise TypeError(f"column {name!r} must be {kind} column, not {t}")
    values = _cast(name, column, pa.int64())
    validity, bit = _validity(values)
    return ("int64", _fixed(values, 8), validity, bit)


def _keys_descriptor(column: Any) -> _Descriptor:
    if _is_text(column.type):
        return _text_descriptor("keys", column)
    if not _is_list_of_text(column.type):
        raise TypeError(
            "column 'keys' must be string (space-separated keys) or list<string>, "
            f"not {column.type}"
        )
    lists = _cast("keys", column, pa.large_list(pa.large_string()))
    validity, bit = _validity(lists)
    offsets, first, last = _nested_offsets(lists.offsets)
    child = lists.values.slice(first, last - first)
    return ("list", offsets, validity, bit, _binary(child))


def _properties_descriptor(column: Any) -> _Descriptor:
    t = column.type
    if not (pa.types.is_map(t) and _is_text(t.key_type) and _is_text(t.item_type)):
        raise TypeError(f"column 'properties' must be map<string, string>, not {t}")
    maps = _cast("properties", column, pa.map_(pa.large_string(), pa.large_string()))
    validity, bit = _validity(maps)
    offsets, first, last = _nested_offsets(maps.offsets)
    keys = maps.keys.slice(first, last - first)
    items = maps.items.slice(first, last - first)
    return ("map", offsets, validity, bit, _binary(keys), _binary(items))


def _describe(name: str, column: Any) -> _Descriptor:
    if name in _TEXT_COLUMNS:
        return _text_descriptor(name, column)
    if name == "body":
        if not _is_binary(column.type):
            raise TypeError(f"column 'body' must be a binary (or string) column, not {column.type}")
        return _binary(_cast(name, column, pa.large_binary()))
    if name in _INT_COLUMNS or name == "born_timestamp":
        return _int_descriptor(name, column)
    if name == "keys":
        return _keys_descriptor(column)
    return _properties_descriptor(column)


def _results(num_rows: int, raw: tuple[Any, ...]) -> pa.RecordBatch:
    status, names, id_offsets, id_data, commitlog, queue, wrote, stored = raw
    n = num_rows
    indices = pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(status)])
    arrays = [
        pa.DictionaryArray.from_arrays(indices, pa.array(names, pa.string())),
        pa.Array.from_buffers(
            pa.string(), n, [None, pa.py_buffer(id_offsets), pa.py_buffer(id_data)]
        ),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(commitlog)]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(queue)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(wrote)]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(stored)]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=RESULT_SCHEMA)


def put_arrow(store: _NativeStore, data: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """Writes the rows of ``data`` (see ``MessageStore.put_batch``) and returns the results."""
    names = list(data.schema.names)
    for name in names:
        if name not in COLUMNS:
            err = InvalidMessageError(
                f"invalid message: unknown column {name!r} "
                f"(expected put() argument names: {', '.join(COLUMNS)})"
            )
            err.field = name
            raise err
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise _error(dup, f"the batch has two {dup!r} columns")
    for required in ("topic", "body"):
        if required not in names:
            raise _error(required, f"the batch has no {required!r} column")
    num_rows = data.num_rows
    if num_rows == 0:
        store.put_batch([])  # still refuses a closed or read-only store
        return pa.RecordBatch.from_pylist([], schema=RESULT_SCHEMA)
    columns = {name: _describe(name, _single(data.column(name))) for name in names}
    return _results(num_rows, store._put_columns(num_rows, columns))


# ---- reads ------------------------------------------------------------------------------


def _string_array(t: pa.DataType, n: int, desc: tuple[Any, ...]) -> Any:
    validity, offsets, data = desc
    bitmap = None if validity is None else pa.py_buffer(validity)
    return pa.Array.from_buffers(t, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)])


def _columns(schema: pa.Schema, n: int, columns: tuple[Any, ...]) -> pa.RecordBatch:
    arrays: list[Any] = []
    for field, desc in zip(schema, columns, strict=True):
        t = field.type
        if pa.types.is_map(t):
            offsets, key_offsets, key_data, value_offsets, value_data = desc
            entries = len(key_offsets) // 4 - 1
            keys = _string_array(pa.string(), entries, (None, key_offsets, key_data))
            values = _string_array(pa.string(), entries, (None, value_offsets, value_data))
            map_offsets: Any = pa.Array.from_buffers(
                pa.int32(), n + 1, [None, pa.py_buffer(offsets)]
            )
            arrays.append(pa.MapArray.from_arrays(map_offsets, keys, values))
        elif isinstance(desc, tuple):
            arrays.append(_string_array(t, n, desc))
        else:
            arrays.append(pa.Array.from_buffers(t, n, [None, pa.py_buffer(desc)]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def message_batch(num_rows: int, columns: tuple[Any, ...]) -> pa.RecordBatch:
    """The ``MESSAGE_SCHEMA`` batch of the native message column buffers."""
    return _columns(MESSAGE_SCHEMA, num_rows, columns)


def consume_queue_batch(num_rows: int, columns: tuple[Any, ...]) -> pa.RecordBatch:
    """The ``CONSUME_QUEUE_SCHEMA`` batch of the native consume queue column buffers."""
    return _columns(CONSUME_QUEUE_SCHEMA, num_rows, columns)


def index_batch(num_rows: int, columns: tuple[Any, ...]) -> pa.RecordBatch:
    """The ``INDEX_SCHEMA`` batch of the native index column buffers."""
    return _columns(INDEX_SCHEMA, num_rows, columns)
