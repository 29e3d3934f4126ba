"""The ``rocketstore`` command: a demo, a benchmark and a store inspector.

Run ``rocketstore --help`` (or ``python -m rocketstore.cli --help``) for the subcommands:

* ``rocketstore demo``: write 1,000,000 messages from an Arrow table into ``./demo-store``,
  read them all back, check them, and print the throughput.
* ``rocketstore bench``: ``put_batch`` throughput for 100-byte and 1 KiB bodies.
* ``rocketstore inspect ROOT``: files, offsets, topics/queues and the recovery report of a
  store (opened read-only: nothing is changed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import rocketstore
from rocketstore.exceptions import MessageStoreError

__all__ = ["main"]

_TAGS = ("TagA", "TagB", "TagC")


# --------------------------------------------------------------------------------------
# Progress bars: tqdm when it is installed, else a small bar on stderr
# --------------------------------------------------------------------------------------


class _Progress:
    """A progress bar over ``total`` units; tqdm if available, else a plain stderr bar."""

    def __init__(self, total: int, desc: str, unit: str = "msg", enabled: bool = True) -> None:
        self.total = total
        self.desc = desc
        self.unit = unit
        self.done = 0
        self.enabled = enabled
        self.start = time.perf_counter()
        self._tqdm: Any = None
        self._stream: TextIO = sys.stderr
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            self._draw()
        else:
            self._tqdm = tqdm(
                total=total, desc=desc, unit=unit, unit_scale=True, file=self._stream, leave=True
            )

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.update(n)
        else:
            self._draw()

    def _draw(self) -> None:
        width = 30
        frac = self.done / self.total if self.total else 1.0
        filled = int(width * frac)
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        self._stream.write(
            f"\r{self.desc}: [{'#' * filled}{'.' * (width - filled)}] "
            f"{self.done:,}/{self.total:,} {self.unit} ({rate / 1e6:.2f} M {self.unit}/s)"
        )
        self._stream.flush()

    def __enter__(self) -> _Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.close()
        else:
            self._stream.write("\n")
            self._stream.flush()


# --------------------------------------------------------------------------------------
# Demo data
# --------------------------------------------------------------------------------------


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


def _remove_store(path: Path) -> None:
    """Deletes a previous demo store; refuses to delete anything that does not look like one."""
    if not path.exists():
        return
    if path.is_dir() and (not any(path.iterdir()) or (path / "commitlog").is_dir()):
        shutil.rmtree(path)
        return
    raise SystemExit(
        f"rocketstore demo: {path} exists and is not a rocketstore store; "
        "choose another --store or remove it yourself"
    )


def _fmt_rate(n: int, seconds: float, nbytes: int) -> str:
    rate = n / seconds if seconds > 0 else float("inf")
    mb = nbytes / seconds / 1e6 if seconds > 0 else float("inf")
    return f"{n:,} msgs in {seconds:.2f} s = {rate / 1e6:.2f} M msg/s, {mb:,.0f} MB/s"


def cmd_demo(args: argparse.Namespace) -> int:
    n: int = args.messages
    store_path = Path(args.store)
    show = not args.quiet
    _remove_store(store_path)
    if show:
        print(
            f"Building {n:,} demo messages ({args.topics} topics x {args.queues} queues, "
            f"{args.body_size}-byte bodies) as an Arrow table..."
        )
    table = demo_table(n, args.body_size, args.topics, args.queues)
    body_bytes = table.column("body").nbytes if n else 0
    chunk = max(1, args.batch_size)

    config = {"mapped_file_size_commit_log": args.file_size} if args.file_size else {}
    with rocketstore.MessageStore(store_path, **config) as store:
        put_seconds = 0.0
        failed = 0
        with _Progress(n, "put_batch", enabled=show) as bar:
            for offset in range(0, n, chunk):
                part = table.slice(offset, chunk)
                t0 = time.perf_counter()
                results = store.put_batch(part)
                put_seconds += time.perf_counter() - t0
                failed += part.num_rows - results.column("status").to_pylist().count("PUT_OK")
                bar.update(part.num_rows)
        t0 = time.perf_counter()
        store.flush()
        flush_seconds = time.perf_counter() - t0

        expected_bodies = table.column("body").to_pylist()
        expected_topics = table.column("topic").to_pylist()
        seen = 0
        mismatches = 0
        t0 = time.perf_counter()
        scan_seconds = 0.0
        with _Progress(n, "scan     ", enabled=show) as bar:
            it = store.scan(verify_crc=True)
            while True:
                t1 = time.perf_counter()
                batch = it.next_batch(65536)
                scan_seconds += time.perf_counter() - t1
                if not batch:
                    break
                for m in batch:
                    if seen >= n or (
                        m.body != expected_bodies[seen] or m.topic != expected_topics[seen]
                    ):
                        mismatches += 1
                    seen += 1
                bar.update(len(batch))
        queues = store.queue_offsets()
        files = store.commitlog_files()

    ok = seen == n and mismatches == 0 and failed == 0
    print(
        f"put_batch: {_fmt_rate(n, put_seconds, body_bytes)}; "
        f"flush: {flush_seconds:.2f} s; "
        f"scan: {_fmt_rate(seen, scan_seconds, body_bytes)} (CRC verified)"
    )
    print(
        f"store: {store_path} ({len(files)} commit log file(s), "
        f"{len(queues)} topic/queue pairs); "
        f"check: {seen:,}/{n:,} messages read back, {mismatches} mismatches, "
        f"{failed} failed puts -> {'OK' if ok else 'FAILED'}"
    )
    return 0 if ok else 1


# --------------------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------------------


def cmd_bench(args: argparse.Namespace) -> int:
    n: int = args.messages
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="rocketstore-bench-"))
    try:
        for size in args.body_sizes:
            table = demo_table(n, size)
            body_bytes = table.column("body").nbytes
            best = float("inf")
            for rep in range(args.repeat):
                path = base / f"bench-{size}-{rep}"
                shutil.rmtree(path, ignore_errors=True)
                with rocketstore.MessageStore(path) as store:
                    # The first put creates the first commit log file; let earlier runs'
                    # writeback finish so that runs do not measure each other.
                    store.put("BenchWarmup", b"x")
                    os.sync()
                    time.sleep(0.5)
                    t0 = time.perf_counter()
                    results = store.put_batch(table)
                    best = min(best, time.perf_counter() - t0)
                    assert results.num_rows == n
                shutil.rmtree(path, ignore_errors=True)
            print(
                f"put_batch {size:>5} B bodies: {_fmt_rate(n, best, body_bytes)} "
                f"(best of {args.repeat})"
            )
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    return 0


# --------------------------------------------------------------------------------------
# inspect
# --------------------------------------------------------------------------------------


def parse_config(items: Sequence[str]) -> dict[str, int | bool | str]:
    """``["key=value", ...]`` → typed configuration keywords (by the field's kind)."""
    kinds = {f.name: f.kind for f in rocketstore.config_fields()}
    config: dict[str, int | bool | str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"rocketstore: --config expects KEY=VALUE, got {item!r}")
        kind = kinds.get(key)
        if kind == "int":
            config[key] = int(value.replace("_", ""))
        elif kind == "bool":
            config[key] = value.strip().lower() in ("1", "true", "yes", "on")
        else:  # str fields, and unknown keys (the store reports those with suggestions)
            config[key] = value
    return config


def inspect_store(root: str | os.PathLike[str], **config: int | bool | str) -> dict[str, Any]:
    """Everything ``rocketstore inspect`` shows, as a dict (the store is opened read-only)."""
    with rocketstore.MessageStore(root, read_only=True, **config) as store:
        config = store.config
        files = []
        for f in store.commitlog_files():
            name = os.path.basename(f)
            files.append(
                {
                    "path": f,
                    "name": name,
                    "start_offset": int(name) if name.isdigit() else None,
                    "size": os.path.getsize(f),
                }
            )
        return {
            "root": os.fspath(root),
            "commitlog_file_size": config["mapped_file_size_commit_log"],
            "min_commitlog_offset": store.min_commitlog_offset(),
            "max_commitlog_offset": store.max_commitlog_offset(),
            "files": files,
            "queues": [
                {"topic": t, "queue_id": q, "next_offset": o} for t, q, o in store.queue_offsets()
            ],
            "recovery": store.recovery_report,
        }


def cmd_inspect(args: argparse.Namespace) -> int:
    info = inspect_store(args.root, **parse_config(args.config))
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"store            {info['root']} (opened read-only; nothing was changed)")
    print(f"commit log       {info['commitlog_file_size']:,} bytes per file")
    print(
        f"offsets          min {info['min_commitlog_offset']:,}  "
        f"max {info['max_commitlog_offset']:,}"
    )
    rec = info["recovery"]
    truncated = rec["truncated_at"]
    state = "ABNORMAL (previous run did not close cleanly)" if rec["abnormal"] else "clean"
    print(
        f"recovery         {state}; "
        f"{rec['records']:,} records scanned, end offset {rec['end_offset']:,}, "
        f"{rec['files_removed']} file(s) removed"
        + (f", torn tail at {truncated[0]:,}: {truncated[1]}" if truncated else "")
    )
    print(f"\nfiles ({len(info['files'])})")
    for f in info["files"]:
        print(f"  {f['name']}  {f['size']:>14,} bytes")
    print(f"\ntopics/queues ({len(info['queues'])})")
    if info["queues"]:
        width = max(len(q["topic"]) for q in info["queues"])
        print(f"  {'topic'.ljust(width)}  queue  next offset")
        for q in info["queues"]:
            print(f"  {q['topic'].ljust(width)}  {q['queue_id']:>5}  {q['next_offset']:>11,}")
    return 0


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------


def _positive(text: str) -> int:
    value = int(text.replace("_", "").replace(",", ""))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rocketstore",
        description=(
            "rocketstore: a message store byte-compatible with Apache RocketMQ's on-disk "
            "store. This tool runs a demo, measures write throughput and inspects stores."
        ),
        epilog=(
            "examples:\n"
            "  rocketstore demo                      write + read back 1,000,000 messages\n"
            "  rocketstore demo --messages 100_000   a smaller run\n"
            "  rocketstore inspect ./demo-store      what is in a store (read-only)\n"
            "  rocketstore bench                     put_batch throughput, 100 B and 1 KiB\n"
            "\nRun 'rocketstore COMMAND --help' for the options of a command."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=rocketstore.__version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = sub.add_parser(
        "demo",
        help="write messages with put_batch from an Arrow table, read them back and check them",
        description=(
            "Writes N messages (several topics and queues, tags, keys, ~100-byte bodies) "
            "with put_batch from an Arrow table into a fresh store, reads them all back with "
            "scan (verifying every CRC and body), and prints the throughput. An existing "
            "store at --store is deleted first."
        ),
    )
    demo.add_argument(
        "--store", default="./demo-store", help="store directory (default: ./demo-store)"
    )
    demo.add_argument(
        "--messages",
        type=_positive,
        default=1_000_000,
        metavar="N",
        help="number of messages (default: 1,000,000)",
    )
    demo.add_argument(
        "--body-size", type=_positive, default=100, metavar="BYTES", help="default: 100"
    )
    demo.add_argument("--topics", type=_positive, default=4, help="default: 4")
    demo.add_argument("--queues", type=_positive, default=8, help="queues per topic; default: 8")
    demo.add_argument(
        "--batch-size",
        type=_positive,
        default=100_000,
        metavar="N",
        help="rows per put_batch call (default: 100,000)",
    )
    demo.add_argument(
        "--file-size",
        type=_positive,
        metavar="BYTES",
        help="commit log file size (default: RocketMQ's 1 GiB)",
    )
    demo.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    demo.set_defaults(func=cmd_demo)

    bench = sub.add_parser(
        "bench",
        help="measure put_batch throughput from Arrow (100 B and 1 KiB bodies)",
        description=(
            "Writes an N-row Arrow table with one put_batch call into a fresh temporary store "
            "(after one warm-up put that creates the first commit log file) and prints the "
            "best of --repeat runs, for each body size."
        ),
    )
    bench.add_argument("--messages", type=_positive, default=1_000_000, metavar="N")
    bench.add_argument(
        "--body-sizes", type=_positive, nargs="+", default=[100, 1024], metavar="BYTES"
    )
    bench.add_argument("--repeat", type=_positive, default=3, help="runs per size (best is shown)")
    bench.add_argument("--dir", help="directory for the temporary stores (default: $TMPDIR)")
    bench.set_defaults(func=cmd_bench)

    inspect = sub.add_parser(
        "inspect",
        help="show the files, offsets, topics/queues and recovery report of a store",
        description="Opens ROOT read-only (no byte changes, no lock taken) and describes it.",
    )
    inspect.add_argument("root", metavar="ROOT", help="the store directory")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of a table")
    inspect.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a store configuration value, e.g. -c mapped_file_size_consume_queue=20480 "
        "(repeatable; see rocketstore.config_fields())",
    )
    inspect.set_defaults(func=cmd_inspect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rocketstore`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except MessageStoreError as e:
        print(f"rocketstore {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"rocketstore {args.command}: interrupted", file=sys.stderr)
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
