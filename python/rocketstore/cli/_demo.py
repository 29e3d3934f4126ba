"""``rocketstore demo`` without Spark, and the demo's data and store geometry.

:func:`demo_table` builds demo messages as an Arrow table; :func:`demo_geometry` sizes the
index and consume queue files of the demo's stores (the Spark demo uses it too).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import rocketstore
from rocketstore._stores import is_store
from rocketstore.cli._errors import EXIT_USAGE, CliError
from rocketstore.cli._progress import Progress

__all__ = ["demo_geometry", "demo_local", "demo_table", "fmt_per_second"]

_TAGS = ("TagA", "TagB", "TagC")


def demo_table(
    n: int, body_size: int = 100, topics: int = 4, queues: int = 8, start: int = 0
) -> Any:
    """An Arrow table of ``n`` demo messages (several topics and queues, tags, keys).

    Row ``i`` has topic ``DemoTopic{i % topics}``, queue ``i // topics % queues`` (so every
    topic uses every queue), tag ``TagA``/``B``/
    ``C``, key ``order-{i}`` and a body of ``body_size`` bytes starting with ``msg-{i:010d}|``.
    Built with vectorized pyarrow functions, so a million rows take well under a second.
    """
    import pyarrow as pa
    import pyarrow.compute

    # pyarrow-stubs do not accept plain str scalars in binary_join_element_wise.
    pc: Any = pyarrow.compute
    idx = pa.array(range(start, start + n), pa.int64())
    digits = pc.utf8_lpad(pc.cast(idx, pa.string()), 10, "0")
    head = pc.binary_join_element_wise("msg-", digits, "|", "")
    filler_len = max(0, body_size - 15)
    filler = ("0123456789abcdefghijklmnopqrstuvwxyz" * (filler_len // 36 + 1))[:filler_len]
    body = pc.binary_join_element_wise(head, filler, "")
    body = pc.cast(pc.utf8_slice_codeunits(body, 0, body_size), pa.binary())

    def cycle(k: int, every: int = 1) -> Any:
        return pa.array([(start + i) // every % k for i in range(n)], pa.int32())

    topic_ids = cycle(topics)
    topic_names = pa.array([f"DemoTopic{t}" for t in range(topics)], pa.string())
    return pa.table(
        {
            "topic": pa.DictionaryArray.from_arrays(topic_ids, topic_names),
            "body": body,
            "queue_id": cycle(queues, every=topics),
            "tags": pa.DictionaryArray.from_arrays(cycle(len(_TAGS)), pa.array(_TAGS)),
            "keys": pc.binary_join_element_wise("order-", pc.cast(idx, pa.string()), ""),
        }
    )


def demo_geometry(messages: int, stores: int) -> dict[str, Any]:
    """Index and consume queue file sizes for the demo's stores, scaled to the data.

    RocketMQ's defaults preallocate a 420 MB index file and 6 MB per queue; the demo sizes
    one index file per store for its keys (about 2.2 per message) and consume queue files
    for its largest queues. ``verify`` must open the stores with the same values.
    """
    keys_per_store = messages * 23 // 10 // max(stores, 1) + 1
    index_num = max(4096, keys_per_store + keys_per_store // 4)
    return {
        "max_index_num": index_num,
        "max_hash_slot_num": max(1024, index_num // 4),
        "mapped_file_size_consume_queue": max(300, messages // 20) * 20,
    }


def _remove_store(path: Path) -> None:
    """Deletes a previous demo store; refuses to delete anything that does not look like one."""
    if not path.exists():
        return
    if path.is_dir() and (not any(path.iterdir()) or is_store(path)):
        shutil.rmtree(path)
        return
    raise CliError(
        f"{path} exists and is not a rocketstore store; "
        "choose another --store or remove it yourself",
        EXIT_USAGE,
    )


def fmt_per_second(value: float) -> str:
    """A rate with its significant digits: ``1,234,567``, ``12.3``, ``0.333``."""
    if not math.isfinite(value):
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _fmt_rate(n: int, seconds: float, nbytes: int) -> str:
    if seconds <= 0:
        return f"{n:,} msgs"
    rate = n / seconds
    mb = nbytes / seconds / 1e6
    return (
        f"{n:,} msgs in {seconds:.2f} s = {fmt_per_second(rate)} msg/s, {fmt_per_second(mb)} MB/s"
    )


def demo_local(args: argparse.Namespace) -> int:
    """The quick demo without Spark: put_batch from Arrow into one store, scan it back."""
    n: int = args.messages
    store_path = Path(args.store)
    show = not args.quiet
    _remove_store(store_path)
    if show:
        print(
            f"Building {n:,} demo messages ({args.topics} topics x {args.queues} queues, "
            f"{args.body_size or 100}-byte bodies) as an Arrow table...",
            # With --json, stdout carries only the JSON summary.
            file=sys.stderr if getattr(args, "json", False) else sys.stdout,
        )
    table = demo_table(n, args.body_size or 100, args.topics, args.queues)
    body_bytes = table.column("body").nbytes if n else 0
    chunk = max(1, args.batch_size)

    config: dict[str, Any] = demo_geometry(n, 1)  # small index and consume queue files
    if args.file_size:
        config["mapped_file_size_commit_log"] = args.file_size
    import pyarrow.compute

    pc: Any = pyarrow.compute  # the stubs reject equal() of a column and a str
    # The figures printed at the end are the wall time of the loops the bars show, so the
    # bars' rates and the summary agree.
    with rocketstore.MessageStore(store_path, **config) as store:
        failed = 0
        with Progress(n, "put_batch", enabled=show) as bar:
            t0 = time.perf_counter()
            for offset in range(0, n, chunk):
                part = table.slice(offset, chunk)
                results = store.put_batch(part)
                ok_rows = pc.sum(pc.equal(results.column("status"), "PUT_OK")).as_py() or 0
                failed += part.num_rows - ok_rows
                bar.update(part.num_rows)
            put_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        store.flush()
        flush_seconds = time.perf_counter() - t0

        expected_bodies = table.column("body").to_pylist()
        expected_topics = table.column("topic").to_pylist()
        seen = 0
        mismatches = 0
        with Progress(n, "scan     ", enabled=show) as bar:
            t0 = time.perf_counter()
            it = store.scan(verify_crc=True)
            while True:
                batch = it.next_batch(65536)
                if not batch:
                    break
                for m in batch:
                    if seen >= n or (
                        m.body != expected_bodies[seen] or m.topic != expected_topics[seen]
                    ):
                        mismatches += 1
                    seen += 1
                bar.update(len(batch))
            scan_seconds = time.perf_counter() - t0
        queues = store.queue_offsets()
        files = store.commitlog_files()

    ok = seen == n and mismatches == 0 and failed == 0
    if getattr(args, "json", False):
        import json

        print(
            json.dumps(
                {
                    "ok": ok,
                    "store": str(store_path),
                    "messages": n,
                    "body_bytes": body_bytes,
                    "put_batch_seconds": put_seconds,
                    "flush_seconds": flush_seconds,
                    "scan_seconds": scan_seconds,
                    "read_back": seen,
                    "mismatches": mismatches,
                    "failed_puts": failed,
                    "commitlog_files": len(files),
                    "queues": len(queues),
                }
            )
        )
        return 0 if ok else 1
    print(
        f"put_batch: {_fmt_rate(n, put_seconds, body_bytes)}; "
        f"flush: {flush_seconds:.2f} s; "
        f"scan: {_fmt_rate(seen, scan_seconds, body_bytes)} (CRC verified, compared in Python)"
    )
    print(
        f"store: {store_path} ({len(files)} commit log file(s), "
        f"{len(queues)} topic/queue pairs); "
        f"check: {seen:,}/{n:,} messages read back, {mismatches} mismatches, "
        f"{failed} failed puts -> {'OK' if ok else 'FAILED'}"
    )
    return 0 if ok else 1
