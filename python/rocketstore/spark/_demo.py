"""Demo data on Spark: :func:`demo_messages`, realistic messages built by Spark itself."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["DEMO_TOPICS", "demo_messages"]

#: Demo topics: (name, share in percent, tags).
DEMO_TOPICS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("orders", 35, ("created", "paid", "cancelled")),
    ("payments", 25, ("authorized", "captured", "refunded")),
    ("shipments", 15, ("packed", "shipped", "delivered")),
    ("user-events", 20, ("click", "view", "cart")),
    ("audit-log", 5, ()),
)


#: The demo bodies' filler: 4,480 hex digits (SHA-256 of "0", "1", ...), sliced per row.
_DEMO_PAD = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(70))


def demo_messages(
    spark: SparkSession,
    n: int = 1_000_000,
    *,
    queues: int = 8,
    body_size: int | None = None,
    partitions: int | None = None,
    start_ms: int = 1_700_000_000_000,
    stores: int | None = None,
) -> DataFrame:
    """``n`` realistic messages as a DataFrame with ``put``'s columns, built by Spark itself.

    Five topics (``orders`` 35 %, ``payments`` 25 %, ``shipments`` 15 %, ``user-events``
    20 %, ``audit-log`` 5 %), ``queues`` queues each, three tags per topic (none for the
    audit log), keys (``ORD-<id>``; payments also carry their order's key; user events the
    user's key ``USR-<n>``; audit records none), properties on orders, born timestamps and
    hosts, and JSON bodies of mixed size (80 % 60-300 B, 18 % 300 B-1.1 KiB, 2 % 1-4 KiB),
    or exactly ``body_size`` bytes when given. Every value is a deterministic function of
    the row id (Spark's ``hash``), so the DataFrame is the same each time it is computed:
    it can be ingested and then passed to :func:`verify` as ``expected``.

    With ``stores``, the rows come as ``stores`` partitions (ids in ranges), and each row's
    queue is one of those of its partition (queue ``q`` in partition ``q mod stores``), so
    ``ingest(df, root, partitioned=True)`` writes one store per partition without a shuffle.

    Example::

        df = demo_messages(spark, 100_000)
        ingest(df, "/tmp/demo", stores=4, mode="overwrite")
    """
    from pyspark.sql import functions as F

    if stores is not None:
        partitions = stores
    ids = spark.range(0, n, 1, partitions) if partitions else spark.range(0, n)
    idc = F.col("id")

    def h(salt: int, mod: int) -> Column:
        return F.pmod(F.hash(idc, F.lit(salt)), F.lit(mod))

    queue = h(4, queues)
    if stores is not None:
        # spark.range puts id in partition p = ceil((id + 1) * stores / n) - 1; its queues
        # are p, p + stores, ... (below `queues`), or p mod queues if there are fewer queues.
        part = F.floor(((idc + F.lit(1)) * F.lit(stores) - F.lit(1)) / F.lit(max(n, 1)))
        own = F.ceil((F.lit(queues) - part) / F.lit(stores))
        queue = F.when(
            part < F.lit(queues), part + F.lit(stores) * F.pmod(F.hash(idc, F.lit(4)), own)
        ).otherwise(F.pmod(part, F.lit(queues)))

    pick = h(1, 100)
    topic_idx: Column = F.lit(len(DEMO_TOPICS) - 1)
    bound = 0
    whens: list[tuple[int, int]] = []
    for i, (_, share, _) in enumerate(DEMO_TOPICS):
        bound += share
        whens.append((bound, i))
    expr = None
    for b, i in whens[:-1]:
        expr = F.when(pick < b, F.lit(i)) if expr is None else expr.when(pick < b, F.lit(i))
    topic_idx = expr.otherwise(F.lit(whens[-1][1])) if expr is not None else topic_idx
    topics = F.array(*[F.lit(t) for t, _, _ in DEMO_TOPICS])
    topic = F.element_at(topics, topic_idx + 1)

    tag_pick = h(2, 3) + 1
    tags = None
    for i, (_, _, tag_names) in enumerate(DEMO_TOPICS):
        value = (
            F.element_at(F.array(*[F.lit(t) for t in tag_names]), tag_pick)
            if tag_names
            else F.lit(None).cast("string")
        )
        tags = F.when(topic_idx == i, value) if tags is None else tags.when(topic_idx == i, value)
    assert tags is not None

    sid = idc.cast("string")
    user = F.concat(F.lit("USR-"), h(3, 250_000).cast("string"))
    order_key = F.concat(F.lit("ORD-"), sid)
    keys = (
        F.when(topic_idx == 1, F.concat(F.lit("PAY-"), sid, F.lit(" "), order_key))
        .when(topic_idx == 3, user)
        .when(topic_idx == 4, F.lit(None).cast("string"))
        .otherwise(order_key)
    )
    ts_ms = F.lit(start_ms) + idc * F.lit(3)
    if body_size is None:
        size_class = h(5, 100)
        pad_len = (
            F.when(size_class < 80, h(6, 240))
            .when(size_class < 98, F.lit(240) + h(6, 800))
            .otherwise(F.lit(1000) + h(6, 3000))
        )
        frame = ids.withColumn("pad_len", pad_len)
        # A slice of a fixed hex text at a per-row offset (no hashing per row in the JVM),
        # sliced as binary: a string substring walks the text character by character.
        payload = F.lit(_DEMO_PAD.encode()).substr(h(13, 256) + F.lit(1), F.col("pad_len"))
        body = F.concat(
            F.lit('{"id":'),
            sid,
            F.lit(',"topic":"'),
            topic,
            F.lit('","user":"'),
            user,
            F.lit('","amount":'),
            F.concat(  # cents as "123.45" (format_number is slow)
                F.floor(h(7, 100_000) / F.lit(100)).cast("string"),
                F.lit("."),
                F.lpad((h(7, 100_000) % F.lit(100)).cast("string"), 2, "0"),
            ),
            F.lit(',"ts":'),
            ts_ms.cast("string"),
            F.lit(',"payload":"'),
            payload,
            F.lit('"}'),
        )
    else:
        frame = ids
        filler = F.expr(f"repeat(sha2(cast(id as string), 256), {body_size // 64 + 1})")
        body = F.substring(F.concat(F.lit("msg-"), sid, F.lit("|"), filler), 1, body_size)
    channels = F.array(F.lit("web"), F.lit("app"), F.lit("partner"))
    properties = F.when(
        topic_idx == 0,
        F.create_map(
            F.lit("channel"),
            F.element_at(channels, h(8, 3) + 1),
            F.lit("region"),
            F.concat(F.lit("eu-"), h(9, 4).cast("string")),
        ),
    )
    born_host = F.concat(
        F.lit("10.1."),
        h(10, 16).cast("string"),
        F.lit("."),
        (h(11, 250) + 1).cast("string"),
        F.lit(":"),
        (F.lit(40000) + h(12, 20000)).cast("string"),
    )
    return frame.select(
        topic.alias("topic"),
        queue.cast("int").alias("queue_id"),
        tags.alias("tags"),
        keys.alias("keys"),
        body.cast("binary").alias("body"),
        properties.alias("properties"),
        F.timestamp_millis(ts_ms).alias("born_timestamp"),
        born_host.alias("born_host"),
    )
