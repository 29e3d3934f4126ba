"""The store tools of the ``rocketstore`` command (no Spark): ``inspect``, ``dump``,
``rebuild-indexes``, ``sweep``, ``verify --no-spark`` and ``bench``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rocketstore
from rocketstore._stores import find_stores, is_store, read_manifest, writer_holds
from rocketstore.cli._errors import (
    EXIT_CHECK_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
)

if TYPE_CHECKING:
    from rocketstore.spark._report import VerifyReport

__all__ = [
    "cmd_bench",
    "cmd_dump",
    "cmd_inspect",
    "cmd_rebuild_indexes",
    "cmd_sweep",
    "cmd_verify_local",
    "inspect_root",
    "inspect_store",
    "parse_config",
    "print_verify",
    "report_files_line",
]


# --------------------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------------------


def cmd_bench(args: argparse.Namespace) -> int:
    from rocketstore import _bench

    if args.from_json:
        from rocketstore import _bench_report

        try:
            doc = json.loads(Path(args.from_json).read_text())
        except (OSError, ValueError) as e:
            print(f"rocketstore bench: cannot read {args.from_json}: {e}", file=sys.stderr)
            return 2
        if not args.markdown and not args.plot:
            print("rocketstore bench: --from-json needs --markdown or --plot", file=sys.stderr)
            return 2
        if args.markdown:
            _bench_report.write_markdown(doc, Path(args.markdown))
        if args.plot:
            _bench_report.plot_peers(doc, Path(args.plot))
        return 0

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
    if args.spark_messages is not None:
        opts.spark_messages = args.spark_messages
    opts.peers = args.peers
    if args.peer_messages is not None:
        opts.peer_messages = args.peer_messages
    opts.scale = args.scale
    opts.follow = args.follow
    opts.remote = args.remote and not args.smoke
    if args.remote_messages is not None:
        opts.remote_messages = args.remote_messages
    if args.scale_sizes is not None:
        opts.scale_sizes = args.scale_sizes
    opts.json_path = args.json
    opts.markdown = args.markdown
    opts.plot = args.plot
    opts.criterion = args.criterion
    opts.criterion_summary = args.criterion_summary
    opts.since = args.since
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
            raise CliError(f"-c/--config expects KEY=VALUE, got {item!r}", EXIT_USAGE)
        kind = kinds.get(key)
        if kind == "int":
            try:
                config[key] = int(value.replace("_", ""))
            except ValueError:
                raise CliError(
                    f"-c/--config {key}: expected an integer, got {value!r}", EXIT_USAGE
                ) from None
        elif kind == "bool":
            config[key] = value.strip().lower() in ("1", "true", "yes", "on")
        else:  # str fields, and unknown keys (the store reports those with suggestions)
            config[key] = value
    return config


def inspect_store(root: str | os.PathLike[str], **config: int | bool | str) -> dict[str, Any]:
    """Everything ``rocketstore inspect`` shows, as a dict (the store is opened read-only).

    ``in_use`` is True when a writer (a ``MessageStore`` opened for writing, in any process)
    holds the store: the figures are then a snapshot of a live store, and its recovery report
    describes that snapshot (a live store always looks like one that was not closed).
    """
    in_use = writer_holds(root)
    settings: dict[str, Any] = dict(config)  # store settings only (no open flag among them)
    with rocketstore.MessageStore(root, read_only=True, **settings) as store:
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
            "in_use": in_use,
        }


def _split_fs(items: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """``(file system settings, other items)`` of ``-c KEY=VALUE`` items."""
    from rocketstore._remote import split_settings

    settings: dict[str, str] = {}
    rest: list[str] = []
    for item in items:
        key, _, value = item.partition("=")
        found = split_settings({key.strip(): value})[0]
        if found:
            settings.update(found)
        else:
            rest.append(item)
    return settings, rest


@contextlib.contextmanager
def local_view(args: argparse.Namespace, command: str) -> Iterator[None]:
    """Makes ``args.root`` a local path for a command that reads stores in place: a
    ``file://`` URI becomes its path; a remote root (``s3://...``, with ``-c fs.s3a.*``
    settings) is downloaded into a temporary directory, removed afterwards; any other scheme
    is refused (``UnsupportedRootError``)."""
    from rocketstore._remote import materialize, resolve_root

    settings, args.config = _split_fs(args.config)
    local, remote = resolve_root(args.root, settings)
    if remote is None:
        if local != os.path.abspath(args.root):  # a file:// URI
            args.root = local
        yield
        return
    if command == "rebuild-indexes":
        raise CliError(
            f"{args.root}: rebuild-indexes changes stores in place; it works on local stores "
            "only (download the store first)",
            EXIT_USAGE,
        )
    with tempfile.TemporaryDirectory(prefix="rocketstore-remote-") as tmp:
        uri = args.root
        path, _, manifest = materialize(uri, settings, Path(tmp))
        n = len(manifest.get("stores", [])) if path.name == "root" else 1
        print(f"rocketstore {command}: {uri}: {n} store(s) downloaded", file=sys.stderr)
        args.root = str(path)
        try:
            yield
        finally:
            args.root = uri


def _stores_or_exit(root: str, command: str) -> list[Path]:
    path = Path(root)
    if not path.exists():
        raise CliError(f"{root}: no such file or directory", EXIT_NOT_FOUND)
    if not path.is_dir():
        raise CliError(f"{root} is not a directory (a store is a directory)", EXIT_NOT_FOUND)
    if not os.access(path, os.R_OK | os.X_OK):
        raise PermissionError(13, "Permission denied", root)
    stores = find_stores(root)
    if not stores:
        raise CliError(
            f"no store at or below {root} (a store is a directory with a commitlog/ directory)",
            EXIT_NOT_FOUND,
        )
    return stores


def _read_manifest(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    try:
        return read_manifest(root)
    except (OSError, ValueError):
        return None


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
        if s.get("in_use"):
            state = "in use by a writer"
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
    with local_view(args, "inspect"):
        return _inspect(args)


def _inspect(args: argparse.Namespace) -> int:
    config = parse_config(args.config)
    root = Path(args.root)
    _stores_or_exit(args.root, "inspect")
    if root.is_dir() and not is_store(root) and find_stores(root):
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
    if info["in_use"]:
        # A live store has its abort file and files ahead of the last checkpoint: what a
        # read-only recovery of it reports describes the snapshot, not damage.
        print(
            "in use           yes: a writer holds this store (opened read-only beside it; "
            "the figures are a snapshot)"
        )
        print(
            f"recovery         not applicable while a writer holds the store; "
            f"{rec['records']:,} records readable, end offset {rec['end_offset']:,}"
        )
    else:
        state = "ABNORMAL (previous run did not close cleanly)" if rec["abnormal"] else "clean"
        removed = rec["files_removed"]
        print(
            f"recovery         {state}; "
            f"{rec['records']:,} records scanned, end offset {rec['end_offset']:,}"
            + (f", {removed} file(s) beyond the end (left in place: read-only)" if removed else "")
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


def _message_dict(store: str, m: Any, decompressed: bool = False) -> dict[str, Any]:
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
        "flag": m.flag,
        "sys_flag": m.sys_flag,
        # Bit 0 of sys_flag: the body is stored compressed (the codec in bits 8-10).
        "body_compressed": bool(m.sys_flag & 1),
        "body_decompressed": decompressed,
        "body_encoding": encoding,
        "body": body,
    }


def _iso_ms(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def cmd_dump(args: argparse.Namespace) -> int:
    with local_view(args, "dump"):
        return _dump(args)


def _dump(args: argparse.Namespace) -> int:
    base = Path(args.root)
    stores = _stores_or_exit(args.root, "dump")
    config = parse_config(args.config)
    found = 0
    shown = 0
    for path in stores:
        name = path.relative_to(base).as_posix() if path != base else path.name
        settings: dict[str, Any] = dict(config)
        with rocketstore.MessageStore(path, read_only=True, **settings) as store:
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
                for stored in result.messages:
                    m = stored.decompressed() if args.decompress else stored
                    was_compressed = bool(stored.sys_flag & 1)
                    if args.json:
                        out = _message_dict(name, m, decompressed=m is not stored)
                        if m is not stored:
                            out["stored_sys_flag"] = stored.sys_flag
                            out["stored_body_size"] = len(stored.body)
                        out["body_compressed"] = was_compressed and m is stored
                        print(json.dumps(out, ensure_ascii=False))
                    else:
                        text = m.body[: args.body_chars].decode("utf-8", "replace")
                        more = "..." if len(m.body) > args.body_chars else ""
                        how = ""
                        if was_compressed:
                            how = (
                                f" (decompressed from {len(stored.body)} B)"
                                if m is not stored
                                else " (compressed; --decompress shows it decompressed)"
                            )
                        print(
                            f"  {m.queue_offset:>8,}  @{m.commitlog_offset:<14,} "
                            f"{_iso_ms(m.store_timestamp)}  tags={m.tags or '-'}  "
                            f"keys={' '.join(m.keys) or '-'}  {len(m.body)} B{how}: "
                            f"{text!r}{more}"
                        )
                    shown += 1
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
    if not found:
        raise CliError(
            f"no store under {args.root} has topic {args.topic!r} queue "
            f"{args.queue} (see rocketstore inspect {args.root})",
            EXIT_NOT_FOUND,
        )
    return EXIT_OK


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
    with local_view(args, "rebuild-indexes"):
        pass  # a file:// URI becomes its path; a remote or unsupported root is refused
    base = Path(args.root)
    config = parse_config(args.config)
    for path in _stores_or_exit(args.root, "rebuild-indexes"):
        name = path.relative_to(base).as_posix() if path != base else str(path)
        t0 = time.perf_counter()
        result = rebuild(path, **config)
        seconds = time.perf_counter() - t0
        if args.json:
            print(json.dumps({"store": name, "seconds": seconds, **result}))
        else:
            print(f"{name}: rebuilt in {seconds:.1f} s: {json.dumps(result)}")
    return EXIT_OK


# --------------------------------------------------------------------------------------
# sweep
# --------------------------------------------------------------------------------------


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def cmd_sweep(args: argparse.Namespace) -> int:
    """``rocketstore sweep``: lists (and with ``--delete`` removes) what no reader of a remote
    root will read: store copies no manifest lists and the uploads of dead jobs, older than
    ``--min-age``."""
    from rocketstore._remote import resolve_root

    settings, rest = _split_fs(args.config)
    if rest:
        raise CliError(
            f"sweep takes file system settings only (-c fs.*=...), not {rest}", EXIT_USAGE
        )
    _, remote = resolve_root(args.root, settings)
    if remote is None:
        raise CliError(
            f"{args.root}: sweep works on remote roots (s3a://, gs://, ...); a local root's "
            "stores are its store-* directories, which readers find by listing",
            EXIT_USAGE,
        )
    found = remote.orphans(args.min_age * 3600.0)
    deleted: list[str] = []
    if args.delete:
        for o in found:
            if o["old_enough"]:
                remote.delete_tree(o["name"])
                deleted.append(o["name"])
    if args.json:
        print(json.dumps({"root": args.root, "orphans": found, "deleted": deleted}, indent=1))
        return EXIT_OK
    old = [o for o in found if o["old_enough"]]
    for o in found:
        if not o["old_enough"]:
            verdict = f"kept: younger than --min-age {args.min_age:g} h"
        elif args.delete:
            verdict = "deleted"
        else:
            verdict = "would delete"
        print(
            f"{o['name']}: {o['files']} files, {_size(o['bytes'])}, newest "
            f"{o['age_seconds'] / 3600:.1f} h old: {verdict}"
        )
    total = sum(int(o["bytes"]) for o in old)
    if args.delete:
        print(f"{args.root}: {len(deleted)} prefix(es) deleted ({_size(total)})")
    else:
        print(
            f"{args.root}: {len(old)} prefix(es) no reader reads ({_size(total)}); "
            "nothing deleted (dry run: add --delete)"
        )
    return EXIT_OK


# --------------------------------------------------------------------------------------
# verify --no-spark
# --------------------------------------------------------------------------------------


def report_files_line(report_path: str | os.PathLike[str]) -> str:
    """The line naming the report files written at ``report_path``: the JSON, and the PNG
    plot if it was drawn (else why not)."""
    target = Path(report_path)
    if target.suffix.lower() != ".json":
        target = target / "verify-report.json"
    png = target.with_suffix(".png")
    if png.exists():
        return f"report: {target} and {png}"
    return (
        f"report: {target} (no {png.name}: the plot needs matplotlib, which is not "
        "installed; pip install matplotlib, or 'rocketstore[spark]' which includes it)"
    )


def print_verify(args: argparse.Namespace, report: VerifyReport) -> int:
    """Prints a verify report (``--json``: as JSON); exit status 1 if a check failed."""
    if args.json:
        print(report.to_json())
    else:
        print(report.format(examples=args.examples))
        if args.report:
            print(report_files_line(args.report))
    return EXIT_OK if report.ok else EXIT_CHECK_FAILED


def cmd_verify_local(args: argparse.Namespace) -> int:
    """``rocketstore verify --no-spark``: the per-store checks in this process (threads);
    needs no PySpark."""
    from rocketstore._remote import resolve_root
    from rocketstore.spark.verify import verify_local

    if args.expected:
        raise CliError("--expected needs Spark (drop --no-spark)", EXIT_USAGE)
    settings, items = _split_fs(args.config)
    local, remote = resolve_root(args.root, settings)
    config: dict[str, Any] = dict(parse_config(items))
    if remote is None:
        _stores_or_exit(local, "verify")
        report = verify_local(
            local, sample_keys=args.sample_keys, report_path=args.report, **config
        )
        return print_verify(args, report)
    with tempfile.TemporaryDirectory(prefix="rocketstore-verify-") as tmp:
        # Each store is downloaded (every file checked against the manifest) and verified.
        keywords: dict[str, Any] = {**config, **settings, "cacheDir": tmp}
        report = verify_local(
            args.root, sample_keys=args.sample_keys, report_path=args.report, **keywords
        )
    return print_verify(args, report)
