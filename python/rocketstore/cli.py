"""The ``rocketstore`` command: Spark jobs (demo, ingest, verify) and store tools.

Run ``rocketstore --help`` (or ``python -m rocketstore.cli --help``) for the subcommands:

* ``rocketstore demo``: generate 1,000,000 messages as a Spark DataFrame, ingest them into
  ``./demo-store`` (4 stores), verify them against the source and print the report and the
  throughput. ``--no-spark`` runs the quick single-process demo (put_batch + scan).
* ``rocketstore ingest --input PATH --store ROOT``: Parquet/JSON/CSV messages into N stores.
* ``rocketstore verify ROOT``: CRCs, framing, consume queues, gaps, index, manifest and
  (``--expected``) equality with the source; exit status 1 if a check fails.
* ``rocketstore inspect ROOT``: files, offsets, topics/queues and the recovery report of a
  store or of every store under a directory (opened read-only: nothing is changed).
* ``rocketstore dump ROOT --topic T --queue Q --from N``: messages of one queue.
* ``rocketstore rebuild-indexes ROOT``: rebuild consume queues and index from the commit log.
* ``rocketstore bench``: put/put_batch/read/recovery figures against plain file, mmap and
  SQLite baselines (``--smoke`` for a 10-second run, ``--json`` for the figures).

The Spark commands need ``pip install 'rocketstore[spark]'`` and Java 17+; the others do not
import PySpark.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
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
    """``rocketstore demo``: the Spark job, or the single-process demo with ``--no-spark``."""
    if args.no_spark:
        return _demo_local(args)
    return _spark_command("cmd_demo", args)


def _demo_local(args: argparse.Namespace) -> int:
    """The quick demo without Spark: put_batch from Arrow into one store, scan it back."""
    n: int = args.messages
    store_path = Path(args.store)
    show = not args.quiet
    _remove_store(store_path)
    if show:
        print(
            f"Building {n:,} demo messages ({args.topics} topics x {args.queues} queues, "
            f"{args.body_size or 100}-byte bodies) as an Arrow table..."
        )
    table = demo_table(n, args.body_size or 100, args.topics, args.queues)
    body_bytes = table.column("body").nbytes if n else 0
    chunk = max(1, args.batch_size)

    config: dict[str, Any] = demo_geometry(n, 1)  # small index and consume queue files
    if args.file_size:
        config["mapped_file_size_commit_log"] = args.file_size
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
    from rocketstore import _bench

    opts = _bench.BenchOptions.smoke_defaults() if args.smoke else _bench.BenchOptions()
    if args.sizes is not None:
        opts.sizes = args.sizes
    if args.messages is not None:
        opts.messages = args.messages
    if args.seconds is not None:
        opts.seconds = args.seconds
    if args.batch is not None:
        opts.batch = args.batch
    if args.file_size is not None:
        opts.file_size = args.file_size
    opts.dir = args.dir
    opts.spark = args.spark and not args.smoke
    opts.json_path = args.json
    opts.quiet = args.quiet
    _bench.run(opts)
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
        files: list[dict[str, Any]] = []
        starts: list[int] = []
        for f in store.commitlog_files():
            name = os.path.basename(f)
            if name.isdigit():
                starts.append(int(name))
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
            # What the files say (a read-only open keeps the configured default).
            "commitlog_file_size": (
                starts[1] - starts[0]
                if len(starts) >= 2
                else files[0]["size"]
                if files
                else config["mapped_file_size_commit_log"]
            ),
            "min_commitlog_offset": store.min_commitlog_offset(),
            "max_commitlog_offset": store.max_commitlog_offset(),
            "files": files,
            "queues": [
                {"topic": t, "queue_id": q, "next_offset": o} for t, q, o in store.queue_offsets()
            ],
            "recovery": store.recovery_report,
        }


def find_stores(root: str | os.PathLike[str]) -> list[Path]:
    """Every store root at or below ``root`` (a directory with ``commitlog/``), sorted.

    ``root`` itself if it is a store; directories whose names start with ``_`` or ``.``
    (such as a writer's ``_temporary``) are skipped, as the Spark reader does.
    """
    base = Path(root)
    if (base / "commitlog").is_dir():
        return [base]
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(base, followlinks=True):
        here = Path(dirpath)
        keep = []
        for name in sorted(dirnames):
            if name.startswith(("_", ".")):
                continue
            if (here / name / "commitlog").is_dir():
                found.append(here / name)
            else:
                keep.append(name)
        dirnames[:] = keep
    return sorted(found)


def _stores_or_exit(root: str, command: str) -> list[Path]:
    if not Path(root).is_dir():
        raise SystemExit(f"rocketstore {command}: {root} is not a directory")
    stores = find_stores(root)
    if not stores:
        raise SystemExit(
            f"rocketstore {command}: no store at or below {root} "
            "(a store is a directory with a commitlog/ directory)"
        )
    return stores


def _read_manifest(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    try:
        data = json.loads((Path(root) / "_SUCCESS").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def inspect_root(root: str | os.PathLike[str], **config: int | bool | str) -> dict[str, Any]:
    """``inspect_store`` of every store under ``root``, with the Spark writer's manifest."""
    stores = find_stores(root)
    base = Path(root)
    return {
        "root": os.fspath(root),
        "manifest": _read_manifest(root),
        "stores": [
            {"name": s.relative_to(base).as_posix(), **inspect_store(s, **config)} for s in stores
        ],
    }


def _print_root(info: dict[str, Any]) -> None:
    stores = info["stores"]
    manifest = info["manifest"]
    print(f"root             {info['root']} ({len(stores)} stores; opened read-only)")
    if manifest:
        totals = manifest.get("totals", {})
        print(
            f"manifest         _SUCCESS: {totals.get('messages', 0):,} messages, "
            f"{totals.get('bytes', 0):,} bytes in {totals.get('stores', 0)} stores "
            f"({manifest.get('mode', '?')} job {str(manifest.get('job_id', '?'))[:8]}, "
            f"{manifest.get('written_at', '?')})"
        )
    else:
        print("manifest         none (no _SUCCESS: not written by the Spark writer)")
    listed = {str(s.get("path")): s for s in (manifest or {}).get("stores", [])}
    width = max([len(s["name"]) for s in stores] + [5])
    print(
        f"\n  {'store'.ljust(width)}  files  {'commit log bytes':>16}  topics  queues  "
        f"{'messages (manifest)':>19}  recovery"
    )
    for s in stores:
        size = s["max_commitlog_offset"] - s["min_commitlog_offset"]
        topics = {q["topic"] for q in s["queues"]}
        entry = listed.get(s["name"])
        count = f"{entry['messages']:,}" if entry else "-"
        rec = s["recovery"]
        state = "abnormal" if rec["abnormal"] else "clean"
        if rec["truncated_at"]:
            state += f", torn tail at {rec['truncated_at'][0]:,}"
        print(
            f"  {s['name'].ljust(width)}  {len(s['files']):>5}  {size:>16,}  {len(topics):>6}  "
            f"{len(s['queues']):>6}  {count:>19}  {state}"
        )
    totals_q: dict[tuple[str, int], int] = {}
    for s in stores:
        for q in s["queues"]:
            key = (q["topic"], q["queue_id"])
            totals_q[key] = totals_q.get(key, 0) + q["next_offset"]
    if totals_q:
        print(f"\ntopics/queues over all stores ({len(totals_q)})")
        tw = max(len(t) for t, _ in totals_q)
        print(f"  {'topic'.ljust(tw)}  queue  messages (sum of next offsets)")
        for (t, q), n in sorted(totals_q.items()):
            print(f"  {t.ljust(tw)}  {q:>5}  {n:>11,}")


def cmd_inspect(args: argparse.Namespace) -> int:
    config = parse_config(args.config)
    root = Path(args.root)
    if root.is_dir() and not (root / "commitlog").is_dir() and find_stores(root):
        root_info = inspect_root(args.root, **config)
        if args.json:
            json.dump(root_info, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            _print_root(root_info)
        return 0
    info = inspect_store(args.root, **config)
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
# dump
# --------------------------------------------------------------------------------------


def _message_dict(store: str, m: Any) -> dict[str, Any]:
    import base64

    try:
        body: str = m.body.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError:
        body = base64.b64encode(m.body).decode("ascii")
        encoding = "base64"
    return {
        "store": store,
        "topic": m.topic,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "commitlog_offset": m.commitlog_offset,
        "store_size": m.store_size,
        "msg_id": m.msg_id,
        "tags": m.tags,
        "keys": list(m.keys),
        "properties": dict(m.properties),
        "born_timestamp": m.born_timestamp,
        "born_host": m.born_host,
        "store_timestamp": m.store_timestamp,
        "store_host": m.store_host,
        "reconsume_times": m.reconsume_times,
        "body_crc": m.body_crc,
        "body_encoding": encoding,
        "body": body,
    }


def _iso_ms(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def cmd_dump(args: argparse.Namespace) -> int:
    base = Path(args.root)
    stores = _stores_or_exit(args.root, "dump")
    config = parse_config(args.config)
    found = 0
    shown = 0
    for path in stores:
        name = path.relative_to(base).as_posix() if path != base else path.name
        with rocketstore.MessageStore(path, read_only=True, **config) as store:
            queues = {(t, q): (lo, hi) for t, q, lo, hi in store.consume_queues()}
            if (args.topic, args.queue) not in queues:
                continue
            found += 1
            lo, hi = queues[(args.topic, args.queue)]
            offset = lo if args.offset is None else args.offset
            if not args.json:
                print(
                    f"{name}: {args.topic} queue {args.queue}: offsets {lo:,}..{hi - 1:,} "
                    f"({hi - lo:,} messages); from {offset:,}"
                )
            while shown < args.max and offset < hi:
                result = store.get_message(
                    args.topic, args.queue, offset, max_messages=min(32, args.max - shown)
                )
                if not result.messages:
                    if not args.json:
                        print(f"  (stopped at offset {offset:,}: {result.status.name})")
                    break
                for m in result.messages:
                    if args.json:
                        print(json.dumps(_message_dict(name, m), ensure_ascii=False))
                    else:
                        text = m.body[: args.body_chars].decode("utf-8", "replace")
                        more = "..." if len(m.body) > args.body_chars else ""
                        print(
                            f"  {m.queue_offset:>8,}  @{m.commitlog_offset:<14,} "
                            f"{_iso_ms(m.store_timestamp)}  tags={m.tags or '-'}  "
                            f"keys={' '.join(m.keys) or '-'}  {len(m.body)} B: {text!r}{more}"
                        )
                    shown += 1
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
    if not found:
        print(
            f"rocketstore dump: no store under {args.root} has topic {args.topic!r} queue "
            f"{args.queue} (see rocketstore inspect {args.root})",
            file=sys.stderr,
        )
        return 1
    return 0


# --------------------------------------------------------------------------------------
# rebuild-indexes
# --------------------------------------------------------------------------------------


def cmd_rebuild_indexes(args: argparse.Namespace) -> int:
    rebuild = getattr(rocketstore, "rebuild_indexes", None)
    if rebuild is None:
        print(
            "rocketstore rebuild-indexes: not available in this build "
            "(rocketstore.rebuild_indexes is missing; it comes with the recovery tools)",
            file=sys.stderr,
        )
        return 2
    base = Path(args.root)
    config = parse_config(args.config)
    for path in _stores_or_exit(args.root, "rebuild-indexes"):
        name = path.relative_to(base).as_posix() if path != base else str(path)
        t0 = time.perf_counter()
        result = rebuild(path, **config)
        print(f"{name}: rebuilt in {time.perf_counter() - t0:.1f} s: {json.dumps(result)}")
    return 0


# --------------------------------------------------------------------------------------
# Spark commands (demo, ingest, verify): rocketstore/spark/_cli.py
# --------------------------------------------------------------------------------------


def _spark_command(name: str, args: argparse.Namespace) -> int:
    try:
        from rocketstore.spark import _cli
    except ImportError as e:
        print(
            f"rocketstore {args.command}: needs PySpark ({e}); install it with "
            "pip install 'rocketstore[spark]' (and Java 17+), or run "
            "'rocketstore demo --no-spark' for the demo without Spark",
            file=sys.stderr,
        )
        return 2
    result: int = getattr(_cli, name)(args)
    return result


def cmd_ingest(args: argparse.Namespace) -> int:
    return _spark_command("cmd_ingest", args)


def cmd_verify(args: argparse.Namespace) -> int:
    return _spark_command("cmd_verify", args)


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------


def _positive(text: str) -> int:
    value = int(text.replace("_", "").replace(",", ""))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps one-paragraph descriptions; keeps text with line breaks (examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _spark_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--master",
        default="local[*]",
        help="Spark master URL (default: local[*], every core of this machine; e.g. "
        "local-cluster[2,1,1024] or spark://host:7077)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. --conf spark.driver.memory=4g (repeatable)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


_EXAMPLES = """\
A store is a directory in Apache RocketMQ's on-disk format (commitlog/, consumequeue/,
index/, checkpoint). The Spark commands write and check directories of stores, one store
per Spark task, described by a _SUCCESS manifest.

examples:
  rocketstore demo                        generate 1,000,000 messages, ingest them with Spark
                                          into ./demo-store (4 stores), verify, print a report
  rocketstore demo --messages 100_000     a smaller run
  rocketstore demo --no-spark             the quick demo without Spark (one store, put_batch)
  rocketstore ingest --input msgs.parquet --store /data/stores --stores 8
                                          write Parquet/JSON/CSV rows (columns named like
                                          put()'s arguments: topic, body, queue_id, tags, keys)
  rocketstore verify /data/stores --expected msgs.parquet --report verify.json
                                          check everything; exit status 1 if a check fails
  rocketstore inspect ./demo-store        what is in a store or directory of stores
  rocketstore dump ./demo-store --topic orders --queue 0 --from 0 --max 5
                                          print messages of one queue
  rocketstore rebuild-indexes ./my-store  rebuild consume queues and index files
  rocketstore bench                       figures against file/mmap/SQLite baselines

Run 'rocketstore COMMAND --help' for the options of a command. The Spark commands (demo,
ingest, verify) need 'pip install rocketstore[spark]' and Java 17+.
"""


def _sizes(text: str) -> list[int]:
    """``"100,1024,4096"`` -> ``[100, 1024, 4096]`` (for ``bench --sizes``)."""
    try:
        sizes = [_positive(t) for t in text.split(",") if t.strip()]
    except (ValueError, argparse.ArgumentTypeError) as e:
        raise argparse.ArgumentTypeError(f"expected sizes like 100,1024,4096: {e}") from e
    if not sizes:
        raise argparse.ArgumentTypeError("expected at least one size")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rocketstore",
        description=(
            "rocketstore: a message store byte-compatible with Apache RocketMQ's on-disk store.\n"
            "This tool bulk-loads stores with Spark, verifies them, shows and dumps their\n"
            "contents, rebuilds their indexes and measures throughput."
        ),
        epilog=_EXAMPLES,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=rocketstore.__version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = sub.add_parser(
        "demo",
        help="the main job on generated data: Spark ingest into 4 stores, then verify",
        description=(
            "Generates N realistic messages as a Spark DataFrame (5 topics, 8 queues each, "
            "tags, keys, properties, JSON bodies from 60 B to 4 KiB), ingests them with Spark "
            "into --stores stores under --store (replacing what the last demo wrote), "
            "verifies every store against the source DataFrame (CRCs, framing, consume "
            "queues, gaps, index lookups, manifest, equality) and prints the report with the "
            "ingest and verify throughput. The report is also written as JSON and PNG. "
            "Exit status 1 if a check fails. With --no-spark: the quick single-process demo "
            "(put_batch from an Arrow table into one store, read back with scan)."
        ),
        epilog=(
            "examples:\n"
            "  rocketstore demo\n"
            "  rocketstore demo --messages 200_000 --stores 2 --master 'local[2]'\n"
            "  rocketstore demo --no-spark --body-size 1024"
        ),
        formatter_class=_HelpFormatter,
    )
    demo.add_argument(
        "--store",
        default="./demo-store",
        help="directory for the stores (default: ./demo-store)",
    )
    demo.add_argument(
        "--no-spark",
        action="store_true",
        help="run the quick demo without Spark: one store, put_batch, scan",
    )
    demo.add_argument(
        "--stores", type=_positive, default=4, help="number of stores (Spark demo; default: 4)"
    )
    demo.add_argument(
        "--report",
        metavar="PATH",
        help="report JSON (a PNG is written next to it; default: STORE/_report/verify.json)",
    )
    demo.add_argument(
        "--sample-keys",
        type=_positive,
        metavar="N",
        help="look up only N evenly spread keyed messages per store in the index "
        "(default: every key)",
    )
    demo.add_argument(
        "--messages",
        type=_positive,
        default=1_000_000,
        metavar="N",
        help="number of messages (default: 1,000,000)",
    )
    demo.add_argument(
        "--body-size",
        type=_positive,
        metavar="BYTES",
        help="--no-spark: body size (default: 100)",
    )
    demo.add_argument("--topics", type=_positive, default=4, help="--no-spark: default: 4")
    demo.add_argument("--queues", type=_positive, default=8, help="queues per topic; default: 8")
    demo.add_argument(
        "--batch-size",
        type=_positive,
        default=100_000,
        metavar="N",
        help="--no-spark: rows per put_batch call (default: 100,000)",
    )
    demo.add_argument(
        "--file-size",
        type=_positive,
        metavar="BYTES",
        help="commit log file size (default: 64 MiB with Spark, RocketMQ's 1 GiB without)",
    )
    _spark_arguments(demo)
    demo.set_defaults(func=cmd_demo)

    ingest = sub.add_parser(
        "ingest",
        help="write a Parquet/JSON/CSV file of messages into N stores with Spark",
        description=(
            "Reads messages from --input (Parquet, JSON lines or CSV with a header; a file "
            "or a directory) and writes them with Spark into --stores new stores under "
            "--store, one Spark task per store, published with a _SUCCESS manifest. Columns "
            "are put()'s argument names: topic and body are required; queue_id, tags, keys "
            "(space-separated), properties, born_timestamp, flag, born_host, store_host are "
            "optional; other columns are ignored. Rows with a queue_id keep it, and each "
            "queue lands in one store."
        ),
        epilog=(
            "examples:\n"
            "  rocketstore ingest --input orders.parquet --store /data/stores\n"
            "  rocketstore ingest --input events/ --format json --store /data/stores \\\n"
            "      --stores 16 --mode overwrite -o mapped_file_size_commit_log=268435456"
        ),
        formatter_class=_HelpFormatter,
    )
    ingest.add_argument("--input", required=True, metavar="PATH", help="file or directory")
    ingest.add_argument(
        "--format",
        choices=("parquet", "json", "csv"),
        help="input format (default: from the file name)",
    )
    ingest.add_argument(
        "--store", required=True, metavar="ROOT", help="directory to write the stores into"
    )
    ingest.add_argument(
        "--stores", type=_positive, default=4, help="number of stores to write (default: 4)"
    )
    ingest.add_argument(
        "--mode",
        choices=("append", "overwrite"),
        default="append",
        help="append: add stores next to existing ones (default); overwrite: replace them",
    )
    ingest.add_argument(
        "--order-by",
        action="append",
        metavar="COLUMN",
        help="sort each store's messages by this column first (repeatable)",
    )
    ingest.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a writer option (queueSelector, queueNums) or store setting, e.g. "
        "-o mapped_file_size_commit_log=268435456 (repeatable)",
    )
    _spark_arguments(ingest)
    ingest.set_defaults(func=cmd_ingest)

    verify = sub.add_parser(
        "verify",
        help="check every store under ROOT (and, with --expected, against the source)",
        description=(
            "Checks every store at or below ROOT with Spark, one task per store, opening "
            "each read-only: every record's CRC and framing, every consume queue unit "
            "against its record, every queue for gaps, an index lookup of every key, and "
            "the _SUCCESS manifest. With --expected, also that the stored messages equal the "
            "source rows (topic, queue, keys, tags, body digest; both ways). Prints one line "
            "per check with examples of failures; exit status 1 if any check fails."
        ),
        epilog=(
            "examples:\n"
            "  rocketstore verify ./demo-store\n"
            "  rocketstore verify --no-spark ./demo-store\n"
            "  rocketstore verify /data/stores --expected orders.parquet --report verify.json"
        ),
        formatter_class=_HelpFormatter,
    )
    verify.add_argument("root", metavar="ROOT", help="a store or a directory of stores")
    verify.add_argument(
        "--expected", metavar="PATH", help="the source messages (Parquet, JSON or CSV)"
    )
    verify.add_argument(
        "--expected-format",
        choices=("parquet", "json", "csv"),
        help="format of --expected (default: from the file name)",
    )
    verify.add_argument(
        "--report",
        metavar="PATH",
        help="write the report as JSON (and a PNG plot next to it) to PATH",
    )
    verify.add_argument(
        "--sample-keys",
        type=_positive,
        metavar="N",
        help="look up only N evenly spread keyed messages per store (default: every key)",
    )
    verify.add_argument(
        "--no-spark",
        action="store_true",
        help="run the per-store checks in this process (one thread per store), without Spark "
        "(no --expected)",
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument(
        "--examples", type=_positive, default=3, help="failure examples shown per check"
    )
    verify.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a store setting for stores with non-default geometry (repeatable)",
    )
    _spark_arguments(verify)
    verify.set_defaults(func=cmd_verify)

    bench = sub.add_parser(
        "bench",
        help="rocketstore against plain file/mmap/SQLite baselines (put, put_batch, reads, ...)",
        description=(
            "Measures, on the same data and in one run: put (one call per message), "
            "put_batch from Arrow, get_message batches, pull wake latency, query_message "
            "and abnormal recovery, and the baselines: the same encoded records appended to "
            "a plain file (the I/O floor) and copied into a pre-faulted mmap (the ceiling), "
            "an SQLite queue (WAL), and with --spark a Parquet write of the same DataFrame. "
            "Prints msgs/s, MB/s (body bytes) and each figure's ratio to its baseline."
        ),
    )
    bench.add_argument(
        "--sizes",
        type=_sizes,
        metavar="B1,B2,...",
        help="body sizes in bytes (default: 100,1024,4096)",
    )
    bench.add_argument(
        "--messages",
        type=_positive,
        metavar="N",
        help="messages per size (default: up to 1,000,000 and 256 MB of bodies)",
    )
    bench.add_argument(
        "--seconds",
        type=float,
        metavar="S",
        help="time box of each per-call loop: put, get_message, query_message, SQLite (default: 2)",
    )
    bench.add_argument(
        "--batch", type=_positive, metavar="ROWS", help="rows per put_batch (default: 16,384)"
    )
    bench.add_argument(
        "--file-size",
        type=_positive,
        metavar="BYTES",
        help="commit log file size (default: 256 MiB)",
    )
    bench.add_argument(
        "--dir",
        help="where to create the temporary stores, i.e. which disk "
        "(default: $ROCKETSTORE_BENCH_DIR, else $TMPDIR)",
    )
    bench.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    bench.add_argument(
        "--spark", action="store_true", help="also compare Spark writes: Parquet vs rocketstore"
    )
    bench.add_argument(
        "--smoke", action="store_true", help="a tiny run of every figure (CI; about 10 s)"
    )
    bench.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    bench.set_defaults(func=cmd_bench)

    inspect = sub.add_parser(
        "inspect",
        help="show the files, offsets, topics/queues and recovery report of stores",
        description=(
            "Opens ROOT read-only (no byte changes, no lock taken) and describes it: for one "
            "store its files, offsets, queues and recovery report; for a directory of stores "
            "one line per store plus the _SUCCESS manifest and the queues over all stores."
        ),
    )
    inspect.add_argument("root", metavar="ROOT", help="a store or a directory of stores")
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

    dump = sub.add_parser(
        "dump",
        help="print the messages of one queue",
        description=(
            "Prints the messages of --topic/--queue from queue offset --from on (read "
            "through the consume queue, stores opened read-only). ROOT may be a store or a "
            "directory of stores; every store that has the queue is dumped."
        ),
        epilog=(
            "examples:\n"
            "  rocketstore dump ./demo-store --topic orders --queue 3 --from 0 --max 5\n"
            "  rocketstore dump ./my-store --topic TopicTest --queue 0 --json | jq .body"
        ),
        formatter_class=_HelpFormatter,
    )
    dump.add_argument("root", metavar="ROOT", help="a store or a directory of stores")
    dump.add_argument("--topic", required=True)
    dump.add_argument("--queue", type=int, required=True, metavar="QUEUE_ID")
    dump.add_argument(
        "--from",
        dest="offset",
        type=int,
        metavar="N",
        help="first queue offset (default: the queue's first)",
    )
    dump.add_argument(
        "--max", type=_positive, default=20, metavar="M", help="messages to print (default: 20)"
    )
    dump.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per message (body as UTF-8 text, else base64)",
    )
    dump.add_argument(
        "--body-chars", type=_positive, default=80, help="body bytes shown per line (text)"
    )
    dump.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a store configuration value (repeatable)",
    )
    dump.set_defaults(func=cmd_dump)

    rebuild = sub.add_parser(
        "rebuild-indexes",
        help="rebuild the consume queues and index files of stores from their commit logs",
        description=(
            "Rebuilds the consume queues and index files of ROOT (a store, or every store "
            "below a directory) from the commit log. The stores must not be open elsewhere."
        ),
    )
    rebuild.add_argument("root", metavar="ROOT", help="a store or a directory of stores")
    rebuild.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a store configuration value (repeatable)",
    )
    rebuild.set_defaults(func=cmd_rebuild_indexes)
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
    except BrokenPipeError:  # e.g. `rocketstore dump ... | head`: the reader left
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return result


if __name__ == "__main__":
    sys.exit(main())
