"""Message bodies as RocketMQ consumers see them, for DataFrames of stored messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from rocketstore.exceptions import InvalidConfigError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


def decompressed(df: DataFrame) -> DataFrame:
    """``df`` with every ``body`` as a RocketMQ consumer sees it: a body whose ``sys_flag``
    marks it compressed (bit 0; the codec in bits 8-10, LZ4, Zstandard or zlib) is
    decompressed, the others are kept. ``sys_flag`` and the other columns are unchanged.

    The reader returns bodies as stored, the way a broker serves them; a producer (or the
    writer's ``compressionType`` option) may have compressed them. The work runs natively in
    the tasks (``mapInArrow``), on the Arrow buffers. A body that does not decompress fails its
    task with ``CorruptionError`` naming the row of the batch.

    Example::

        from rocketstore.spark import decompressed

        df = decompressed(spark.read.format("rocketstore").load("/data/stores"))
        df.selectExpr("sum(length(body))").show()
    """
    missing = [c for c in ("body", "sys_flag") if c not in df.columns]
    if missing:
        err = InvalidConfigError(
            f"decompressed() needs the columns body and sys_flag of the rocketstore reader; "
            f"the DataFrame has no {', '.join(missing)}"
        )
        err.key = missing[0]
        raise err

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from rocketstore._native import decompress_bodies

        for batch in batches:
            i = batch.schema.get_field_index("body")
            body = decompress_bodies(batch.column(i), batch.column("sys_flag"))
            columns = list(batch.columns)
            columns[i] = body.cast(batch.schema.field(i).type)
            yield pa.RecordBatch.from_arrays(columns, schema=batch.schema)

    return df.mapInArrow(run, df.schema)
