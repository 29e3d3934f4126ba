"""BENCHMARKS.md's tables and plots from one ``rocketstore bench --json`` document.

``rocketstore bench ... --markdown BENCHMARKS.md`` (``make bench``) calls :func:`write_markdown`:
each table sits between ``<!-- BEGIN bench:NAME -->`` and ``<!-- END bench:NAME -->`` in the
page and is replaced there, so the prose around the tables is kept; a page without a block gets
it appended under its own heading, and a missing page is written from :data:`SECTIONS`. Every
figure is shown as msg/s and whole-process CPU ns per message beside its same-run baseline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "SECTIONS",
    "criterion_results",
    "plot_peers",
    "render",
    "scale_table",
    "write_markdown",
]

# (block name, heading, the command that reproduces it)
SECTIONS: list[tuple[str, str, str]] = [
    ("machine", "The machine and the run", "make bench"),
    ("write", "Write", "rocketstore bench --sizes 100,1024"),
    ("read", "Read", "rocketstore bench --sizes 100,1024"),
    ("lookup", "Key lookup", "rocketstore bench --sizes 100,1024"),
    ("peers", "Beside the peers", "rocketstore bench --peers --sizes 100,1024"),
    ("disk", "Disk use per million messages", "rocketstore bench --peers --sizes 100,1024"),
    ("recovery", "Recovery and reopen", "rocketstore bench --scale"),
    ("scale", "Cost growth with size", "rocketstore bench --scale --scale-sizes 1,4"),
    ("spark", "Spark", "rocketstore bench --spark"),
    ("remote", "Spark on an S3 server (remote roots)", "rocketstore bench --remote"),
    ("follow", "A reader in another process", "rocketstore bench --follow"),
    ("criterion", "The engine alone (criterion, Rust)", "cargo bench -p rocketstore-benches"),
]

PEER_LABELS = {
    "rocketstore": "rocketstore",
    "lmdb": "LMDB (`lmdb`, sync off, key -> seq table)",
    "rocksdb": "RocksDB (`rocksdict`, write batches)",
    "sqlite": "SQLite (WAL, synchronous=NORMAL, index on key)",
    "delta": "Delta Lake (`deltalake`, append per batch)",
    "parquet": "Parquet (one file per batch)",
}


def _size(b: int) -> str:
    return f"{b // 1024} KiB" if b >= 1024 and b % 1024 == 0 else f"{b} B"


def _rate(x: float | None) -> str:
    if not x:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M/s"
    if x >= 1e3:
        return f"{x / 1e3:.0f} k/s" if x >= 1e5 else f"{x / 1e3:.1f} k/s"
    return f"{x:.0f} /s"


def _cpu(r: dict[str, Any] | None) -> str:
    if not r or r.get("skipped") or not r.get("cpu_seconds") or not r.get("messages"):
        return "-"
    return f"{r['cpu_ns_per_msg']:,.0f}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


class _Doc:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.results: list[dict[str, Any]] = doc.get("results", [])
        self.by = {(r["name"], r["size"]): r for r in self.results}
        self.sizes = sorted(
            {r["size"] for r in self.results if not r["name"].startswith(("spark", "remote_"))}
        )

    def get(self, name: str, size: int) -> dict[str, Any] | None:
        r = self.by.get((name, size))
        return r if r and not r.get("skipped") else None

    def pair_rows(self, pairs: list[tuple[str, str, str]]) -> list[list[str]]:
        """``(figure, label, baseline)`` -> one row per size: the figure beside its baseline."""
        rows = []
        for name, label, base in pairs:
            for size in self.sizes:
                r, b = self.by.get((name, size)), self.get(base, size)
                if r is None:
                    continue
                if r.get("skipped"):
                    rows.append([label, _size(size), "skipped: " + r["skipped"][:80]] + [""] * 5)
                    continue
                ratio = f"{r['msgs_per_s'] / b['msgs_per_s']:.2f}x" if b else "-"
                rows.append(
                    [
                        label,
                        _size(size),
                        _rate(r["msgs_per_s"]),
                        _cpu(r),
                        f"`{base}`",
                        _rate(b["msgs_per_s"]) if b else "-",
                        _cpu(b),
                        ratio,
                    ]
                )
        return rows


PAIR_HEAD = [
    "figure",
    "body",
    "msg/s",
    "CPU ns/msg",
    "same-run baseline",
    "baseline msg/s",
    "baseline CPU ns/msg",
    "ratio",
]


def _machine(d: _Doc) -> str:
    doc = d.doc
    m = doc.get("machine", {})
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(doc.get("started", 0)))
    rows = [
        ["when", started],
        ["commit", doc.get("commit", "-")],
        ["CPU", f"{m.get('cpu', '?')}, {m.get('cpus', '?')} cores"],
        ["memory", f"{m.get('mem_gb', '?')} GB"],
        ["system", f"{m.get('platform', '?')}, Python {m.get('python', '?')}"],
        ["build", f"Rust release profile, cross-crate LTO: {m.get('release_lto', 'thin')}"],
        [
            "load average (1, 5, 15 min)",
            f"{doc.get('loadavg_start', '?')} at the start, {m.get('loadavg', '?')} at the end "
            "(the machine is shared: compare each figure with its same-run baseline)",
        ],
        ["run time", f"{doc.get('seconds', 0) / 60:.1f} min of `rocketstore bench`"],
    ]
    if doc.get("make_bench_seconds"):
        rows.append(["`make bench`", f"{doc['make_bench_seconds'] / 60:.1f} min in all"])
    return _table(["", ""], rows)


def _write(d: _Doc) -> str:
    rows = d.pair_rows(
        [
            ("put_batch", "`put_batch` (Arrow, 16,384 rows a call)", "sqlite_executemany"),
            ("put_batch", "`put_batch`: the I/O floor", "file_write"),
            ("put_batch", "`put_batch`: the ceiling", "mmap_memcpy"),
            ("put", "`put` (one call per message)", "sqlite_insert"),
        ]
    )
    return _table(PAIR_HEAD, rows) + (
        "\n\n`file_write`: the same encoded records `write()`n to a plain file per batch; "
        "`mmap_memcpy`: copied into a pre-faulted mapping; `sqlite_*`: an SQLite queue, WAL, "
        "`synchronous=NORMAL`. No fsync per batch anywhere."
    )


def _read(d: _Doc) -> str:
    rows = d.pair_rows(
        [
            ("get_message_arrow", "`get_message_arrow` (each queue, Arrow)", "file_read"),
            ("read_arrow", "`read_arrow` (the commit log, Arrow)", "file_read"),
            ("get_message", "`get_message` (32 a call)", "sqlite_read"),
            (
                "peers_rocketstore_read_body",
                '`get_message_arrow(columns=["body"])`',
                "peers_lmdb_read",
            ),
        ]
    )
    return _table(PAIR_HEAD, rows) + (
        "\n\n`file_read`: `readinto()` of the commit log files, page cache warm (the scan "
        "floor); `peers_lmdb_read`: an LMDB cursor over seq -> body, values only (bodies alone)."
    )


def _lookup(d: _Doc) -> str:
    rows = d.pair_rows(
        [
            ("query_messages", "`query_messages` (256 keys a call)", "sqlite_lookup_batch"),
            ("query_message", "`query_message` (one key a call)", "sqlite_lookup"),
        ]
    )
    text = _table(PAIR_HEAD, rows)
    wake = [d.get("pull_wake", s) for s in d.sizes]
    lat = [
        f"{_size(s)}: p50 {_duration(w['extra']['p50_us'] * 1e3)}, "
        f"p99 {_duration(w['extra']['p99_us'] * 1e3)}"
        for s, w in zip(d.sizes, wake, strict=True)
        if w
    ]
    if lat:
        text += (
            "\n\nA `pull` parked in a thread, woken by one `put` (the call to the pull's "
            "return): " + "; ".join(lat) + "."
        )
    return text + (
        "\n\nKeys are random over the million messages; SQLite's baseline looks up its "
        "primary key (one `SELECT` a key, or 256 in an `IN`)."
    )


def _peers(d: _Doc) -> str:
    parts = []
    lookups = int(d.doc.get("options", {}).get("peer_lookups", 100_000))
    for size in d.sizes:
        rows = []
        for system, label in PEER_LABELS.items():
            cells = [label]
            ops = ("append", "read", "lookup")
            if all(d.by.get((f"peers_{system}_{op}", size)) is None for op in ops):
                continue
            skipped = [
                r
                for op in ops
                if (r := d.by.get((f"peers_{system}_{op}", size))) and r.get("skipped")
            ]
            if skipped:
                rows.append([label, "skipped: " + skipped[0]["skipped"][:90], "", "", ""])
                continue
            for op in ops:
                r = d.get(f"peers_{system}_{op}", size)
                cells.append(f"{_rate(r['msgs_per_s'])}, {_cpu(r)}" if r else "-")
            disk = d.get(f"peers_{system}_disk", size)
            cells.append(f"{disk['extra']['bytes'] / 1e6:,.0f} MB" if disk else "-")
            rows.append(cells)
        if not rows:
            continue
        n = max(
            (
                r["messages"]
                for r in d.results
                if r["name"].startswith("peers_")
                and r["name"].endswith("_append")
                and r["size"] == size
                and not r.get("skipped")
            ),
            default=0,
        )
        parts.append(
            f"**{n:,} x {_size(size)}**, a key each, batches of 16,384, no fsync per batch "
            "(msg/s, CPU ns/msg):\n\n"
            + _table(
                ["system", "append", "in-order read", f"{lookups:,} key lookups", "disk"], rows
            )
        )
    body = d.get("peers_rocketstore_read_body", d.sizes[0]) if d.sizes else None
    note = (
        "\n\nrocketstore: `put_batch` (until the consume queues and index are written), "
        "`get_message_arrow` over each queue (every column), `query_messages` (256 keys a "
        "call), `MessageStore(path)` defaults. The peers get Python `bytes` (or Arrow, for "
        "Delta Lake and Parquet) prepared before the clock starts; lookups that scan are "
        "time-boxed to 5 s (the rate is of the keys done). Bodies are a row number and a "
        "repeated filler: the compressing formats (Parquet, Delta Lake, RocksDB) shrink them."
    )
    if body is None:
        note += " Bodies alone (`columns=`) are not in this build: the read column reads all."
    return "\n\n".join(parts) + note if parts else "(not run: `--peers`)"


def _disk(d: _Doc) -> str:
    rows = []
    sizes = [s for s in d.sizes if any(d.get(f"peers_{p}_disk", s) for p in PEER_LABELS)]
    if not sizes:
        return "(not run: `--peers`)"
    rows.append(["the bodies alone"] + [f"{s * 1e6 / 1e6:,.0f} MB" for s in sizes])
    for system, label in PEER_LABELS.items():
        cells = [label.split(" (")[0]]
        for s in sizes:
            r = d.get(f"peers_{system}_disk", s)
            cells.append(f"{r['extra']['bytes'] / r['messages'] * 1e6 / 1e6:,.0f} MB" if r else "-")
        rows.append(cells)
    return _table(["system"] + [f"{_size(s)} bodies" for s in sizes], rows) + (
        "\n\nBlocks in use (`st_blocks`, as `du`) after close, per million messages, same run."
    )


def _recovery(d: _Doc) -> str:
    rows = d.pair_rows(
        [("recovery", "abnormal recovery (CQ and index rebuilt)", "file_read")],
    )
    text = _table(PAIR_HEAD, rows)
    rec = [d.get("recovery", s) for s in d.sizes]
    notes = [
        f"{_size(s)}: {r['extra']['commitlog_bytes'] / 1e6:,.0f} MB of commit log, "
        f"{r['extra'].get('s_per_gb', 0):.2f} s per GB"
        for s, r in zip(d.sizes, rec, strict=True)
        if r
    ]
    if notes:
        text += "\n\n" + "; ".join(notes) + "."
    scale = d.doc.get("scale") or []
    if scale:
        head = ["reopen"] + [f"{r['gib']} GiB store" for r in scale]
        rows2 = [
            ["clean open (s), walked"]
            + [f"{r['clean_open']:.2f}, {r['clean_open_walked'] / 1e9:.2f} GB" for r in scale],
            ["clean open with `normal_recovery_from_checkpoint` (s), walked"]
            + [
                f"{r['clean_open_cp']:.3f}, {r['clean_open_cp_walked'] / 1e6:.1f} MB" for r in scale
            ],
            ["reopen after kill -9, 2 s idle (s), walked"]
            + [
                f"{r['crash_paused']['seconds']:.2f}, "
                f"{r['crash_paused']['walked_bytes'] / 1e6:,.0f} MB"
                for r in scale
            ],
            ["reopen after kill -9 while writing (s), walked"]
            + [
                f"{r['crash_writing']['seconds']:.2f}, "
                f"{r['crash_writing']['walked_bytes'] / 1e6:,.0f} MB"
                for r in scale
            ],
        ]
        text += "\n\n" + _table(head, rows2)
    return text


def _scale(d: _Doc) -> str:
    scale = d.doc.get("scale") or []
    if not scale:
        return "(not run: `--scale`)"
    base = scale[0]
    head = ["figure (msg/s, CPU ns/msg)"] + [
        f"{r['gib']} GiB" + (" (baseline)" if i == 0 else "") for i, r in enumerate(scale)
    ]

    def cell(r: dict[str, Any], k: str) -> str:
        rate, cpu = r[k]
        ratio = "" if r is base else f" ({rate / base[k][0]:.2f}x)"
        return f"{_rate(rate)}, {cpu:,.0f}{ratio}"

    rows = [
        ["`put_batch`, first GiB"] + [cell(r, "put_first") for r in scale],
        ["`put_batch`, last GiB"] + [cell(r, "put_last") for r in scale],
        ["`read_arrow`, first GiB"] + [cell(r, "read_first") for r in scale],
        ["`read_arrow`, last GiB"] + [cell(r, "read_last") for r in scale],
        ["`query_message`, keys of the first GiB"] + [cell(r, "query_first") for r in scale],
        ["`query_message`, keys of the last GiB"] + [cell(r, "query_last") for r in scale],
        ["put p99 / max during `delete_expired_files` (ms)"]
        + [f"{r['cleanup']['p99_ms']:.3f} / {r['cleanup']['max_ms']:.1f}" for r in scale],
        ["  the same thread, no cleanup (ms)"]
        + [f"{r['cleanup']['base_p99_ms']:.3f} / {r['cleanup']['base_max_ms']:.1f}" for r in scale],
    ]
    return _table(head, rows) + (
        "\n\n1 KiB messages with a key each into `MessageStore(path)` (1 GiB commit log files); "
        "reads and lookups after a `flush()`, best of three alternated rounds; (x) is the "
        "ratio to the smallest store, same run."
    )


def scale_table(scale: list[dict[str, Any]]) -> str:
    """The cost-growth table of ``--scale`` results (as on the page)."""
    return _scale(_Doc({"scale": scale}))


def _spark(d: _Doc) -> str:
    spark = [r for r in d.results if r["name"].startswith("spark")]
    if not spark:
        return "(not run: `--spark`)"
    size = spark[0]["size"]
    pairs = [
        ("spark_rocketstore", 'write `format("rocketstore")` (default path)', "spark_parquet"),
        ("spark_rocketstore_py", "write, the Python writer", "spark_parquet"),
        (
            "spark_read_rocketstore",
            "read + `sum(length(body))` (default path)",
            "spark_read_parquet",
        ),
        ("spark_read_rocketstore_py", "read, the Python reader", "spark_read_parquet"),
        (
            "spark_read_rocketstore_body",
            'read `.schema("body binary")`, Python',
            "spark_read_parquet",
        ),
    ]
    rows = []
    for name, label, base in pairs:
        r, b = d.by.get((name, size)), d.get(base, size)
        if r is None:
            continue
        if r.get("skipped"):
            rows.append([label, "skipped: " + r["skipped"][:80], "", "", "", ""])
            continue
        rows.append(
            [
                label,
                _rate(r["msgs_per_s"]),
                _cpu(r),
                _rate(b["msgs_per_s"]) if b else "-",
                _cpu(b),
                f"{r['msgs_per_s'] / b['msgs_per_s']:.2f}x" if b else "-",
            ]
        )
    n = spark[0].get("messages") or 0
    head = ["figure", "msg/s", "CPU ns/msg", "Parquet msg/s", "Parquet CPU ns/msg", "ratio"]
    text = (
        f"**{n:,} x {_size(size)}**, a tag and a key each:\n\n"
        + _table(head, rows)
        + (
            "\n\nA plain `SparkSession` on `local[2]`, one cached 2-partition DataFrame written "
            "as Parquet and as rocketstore, each read back and aggregated; one untimed warm-up "
            "each; CPU of the whole process tree (driver, JVM, Python workers)."
        )
    )
    sink, batch = d.by.get(("spark_sink", size)), d.get("spark_batch_files", size)
    if sink is not None:
        if sink.get("skipped"):
            cells = ["skipped: " + sink["skipped"][:80], "", "", "", ""]
        else:
            ratio = f"{sink['msgs_per_s'] / batch['msgs_per_s']:.2f}x" if batch else "-"
            cells = [
                _rate(sink["msgs_per_s"]),
                _cpu(sink),
                _rate(batch["msgs_per_s"]) if batch else "-",
                _cpu(batch),
                ratio,
            ]
        text += (
            "\n\nThe streaming sink beside the batch writer, the same rows from the same files:\n\n"
        )
        text += _table(
            ["figure", "msg/s", "CPU ns/msg", "batch msg/s", "batch CPU ns/msg", "ratio"],
            [['`writeStream.format("rocketstore")`, 5 micro-batches, 2 stores', *cells]],
        )
        text += (
            "\n\nBoth read the rows as 10 Parquet files; the batch writer in one job, the sink "
            "with `maxFilesPerTrigger` 2 and `trigger(availableNow=True)`, its task and commit "
            "records, flushes and cleanup included; one untimed warm-up each."
        )
    return text


def _remote(d: _Doc) -> str:
    rows_in = {r["name"]: r for r in d.results if r["name"].startswith("remote_")}
    if not rows_in:
        return "(not run: `--remote`)"
    labels = [
        ("remote_write_local", "rocketstore write, local root (reference)"),
        ("remote_write", "rocketstore write to `s3a://`"),
        ("remote_write_parquet", "Parquet write (`pyarrow.parquet` over `pyarrow.fs`, per task)"),
        ("remote_read", "rocketstore read, cold download cache"),
        ("remote_read_parquet", "Parquet read (`pyarrow.parquet`, per task)"),
    ]
    rows = []
    for name, label in labels:
        r = rows_in.get(name)
        if r is None:
            continue
        if r.get("skipped"):
            rows.append([label, "skipped: " + r["skipped"][:80], "", "", ""])
            continue
        server = r["extra"].get("server_cpu_seconds", 0.0)
        rows.append(
            [
                label,
                _rate(r["msgs_per_s"]),
                _cpu(r),
                f"{server * 1e9 / r['messages']:,.0f}" if r["messages"] else "-",
                f"{r['ratio']:.2f}x" if r.get("ratio") else "",
            ]
        )
    any_r = next(iter(rows_in.values()))
    text = _table(
        ["phase", "msg/s", "CPU ns/msg (Spark + Python)", "S3 server CPU ns/msg", "to Parquet"],
        rows,
    )
    stored = [
        f"{label} {r['extra']['stored_bytes'] / 1e6:,.1f} MB"
        for name, label in (("remote_write", "rocketstore"), ("remote_write_parquet", "Parquet"))
        if (r := rows_in.get(name)) and "stored_bytes" in r.get("extra", {})
    ]
    text = (
        f"**{any_r.get('messages') or 0:,} rows x {_size(any_r['size'])}**, a key each; moto's S3 "
        "server on loopback, `local[2]`, 2 tasks; one untimed warm-up of every path; CPU of the "
        "whole process tree, the server's apart.\n\n" + text
    )
    if stored:
        text += "\n\nOn the server: " + ", ".join(stored) + "."
    return text


def _duration(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:,.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:,.1f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:,.1f} us"
    return f"{ns:,.0f} ns"


def criterion_results(root: Path) -> list[dict[str, Any]]:
    """Each criterion benchmark under ``root`` (``target/criterion``): its id, the mean time
    per iteration and the elements per iteration (from ``new/estimates.json`` and
    ``new/benchmark.json``)."""
    out: list[dict[str, Any]] = []
    if not root.is_dir():
        return out
    for est in sorted(root.glob("**/new/estimates.json")):
        meta = est.parent / "benchmark.json"
        try:
            e = json.loads(est.read_text())
            m = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        thr = m.get("throughput") or {}
        elements = thr.get("Elements") or thr.get("elements")
        nbytes = thr.get("Bytes") or thr.get("bytes")
        out.append(
            {
                "id": m.get("full_id") or m.get("title") or str(est.parent.parent),
                "ns": e["mean"]["point_estimate"],
                "elements": elements,
                "bytes": nbytes,
                "mtime": est.stat().st_mtime,
            }
        )
    return out


def _criterion(d: _Doc) -> str:
    rows_in = d.doc.get("criterion") or []
    summary = d.doc.get("criterion_summary") or []
    if not rows_in:
        return "(not run: `cargo bench -p rocketstore-benches`)"
    rows = []
    for r in rows_in:
        per = r["ns"]
        if r.get("elements"):
            rate = _rate(r["elements"] / (per / 1e9))
            unit = f"{per / r['elements']:,.0f} ns/msg"
        elif r.get("bytes"):
            rate = f"{r['bytes'] / (per / 1e9) / 1e9:.2f} GB/s"
            unit = _duration(per) + " per iteration"
        else:
            rate, unit = "-", _duration(per) + " per iteration"
        rows.append([f"`{r['id']}`", rate, unit])
    text = _table(["benchmark", "throughput", "time"], rows)
    cpu = [s for s in summary if "cpu_ns_per_msg" in s]
    if cpu:
        text += "\n\nWhole-process CPU per message (the benches' own passes, same run):\n\n"
        text += _table(
            ["bench", "msg/s", "CPU ns/msg"],
            [
                [
                    f"`{s['name']}`",
                    _rate(s.get("msgs_per_s") or s.get("msg_per_s")),
                    f"{s['cpu_ns_per_msg']:,.0f}",
                ]
                for s in cpu
            ],
        )
    return text + (
        "\n\nThe Rust engine without Python (criterion means; ROCKETSTORE_BENCH_DIR picks the "
        "disk). The comparisons with a baseline are the Python tables above."
    )


def _follow(d: _Doc) -> str:
    rows = [r for r in d.results if r["name"].startswith("follow_")]
    if not rows:
        return "(not run: `--follow`)"
    size = rows[0]["size"]
    out = []
    wake, local = d.get("follow_wake", size), d.get("pull_wake_local", size)
    if wake:
        lat = []
        for label, r in (("put -> pull in another process", wake), ("same process", local)):
            if r:
                e = r["extra"]
                lat.append(
                    [
                        label,
                        f"{e['p50_us']:.0f}",
                        f"{e['p99_us']:.0f}",
                        f"{e['p999_us']:.0f}",
                        f"{e['max_us']:.0f}",
                        str(r["messages"]),
                    ]
                )
        out.append(_table(["wake latency (us)", "p50", "p99", "p99.9", "max", "wakes"], lat))
    idle = d.get("follow_idle", size)
    if idle:
        out.append(
            f"Reader CPU while parked in `pull` for {idle['seconds']:.1f} s: "
            f"{idle['extra']['idle_cpu_pct']}% of a core."
        )
    tail, write = d.get("follow_tail", size), d.get("follow_write", size)
    if tail and write:
        out.append(
            _table(
                ["", "msg/s", "CPU ns/msg"],
                [
                    [
                        "one reader process tailing (pull of 1,024)",
                        _rate(tail["msgs_per_s"]),
                        _cpu(tail),
                    ],
                    [
                        "the writer it follows (`put_batch` of 1,024)",
                        _rate(write["msgs_per_s"]),
                        _cpu(write),
                    ],
                ],
            )
        )
    return f"{size} B bodies.\n\n" + "\n\n".join(out)


RENDER: dict[str, Callable[[_Doc], str]] = {
    "machine": _machine,
    "write": _write,
    "read": _read,
    "lookup": _lookup,
    "peers": _peers,
    "disk": _disk,
    "recovery": _recovery,
    "scale": _scale,
    "spark": _spark,
    "remote": _remote,
    "follow": _follow,
    "criterion": _criterion,
}


def render(doc: dict[str, Any]) -> dict[str, str]:
    """Each block's Markdown from a ``--json`` document."""
    d = _Doc(doc)
    return {name: RENDER[name](d) for name, _, _ in SECTIONS}


def _block(name: str, text: str) -> str:
    return f"<!-- BEGIN bench:{name} -->\n{text}\n<!-- END bench:{name} -->"


def write_markdown(doc: dict[str, Any], path: Path, plot: Path | None = None) -> None:
    """Replaces each block of ``path`` with this run's table (see the module docstring); with
    ``plot``, also draws the peers' figures there (PNG, when matplotlib is installed)."""
    blocks = render(doc)
    text = path.read_text() if path.exists() else "# rocketstore benchmarks\n"
    for name, heading, command in SECTIONS:
        pattern = re.compile(rf"<!-- BEGIN bench:{name} -->.*?<!-- END bench:{name} -->", re.S)
        block = _block(name, blocks[name])
        if pattern.search(text):
            text = pattern.sub(lambda _m: block, text)  # noqa: B023 (used at once)
        else:
            text += f"\n## {heading}\n\n`{command}`\n\n{block}\n"
    path.write_text(text)
    if plot is not None:
        plot_peers(doc, plot)


def plot_peers(doc: dict[str, Any], out: Path) -> bool:
    """Bars of each system's append, read and lookup msg/s per body size (log scale); False
    (nothing drawn) without matplotlib or peers' figures."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = _Doc(doc)
    sizes = [
        s for s in d.sizes if d.get("peers_lmdb_append", s) or d.get("peers_rocketstore_append", s)
    ]
    if not sizes:
        return False
    systems = [s for s in PEER_LABELS if any(d.get(f"peers_{s}_append", z) for z in sizes)]
    ops = [("append", "append"), ("read", "in-order read"), ("lookup", "key lookup")]
    fig, axes = plt.subplots(1, len(sizes), figsize=(6.5 * len(sizes), 4.8), squeeze=False)
    width = 0.8 / max(1, len(systems))
    for ax, size in zip(axes[0], sizes, strict=True):
        for i, system in enumerate(systems):
            vals = []
            for op, _ in ops:
                r = d.get(f"peers_{system}_{op}", size)
                vals.append(r["msgs_per_s"] if r else 0)
            xs = [j + (i - (len(systems) - 1) / 2) * width for j in range(len(ops))]
            ax.bar(xs, vals, width, label=PEER_LABELS[system].split(" (")[0])
        ax.set_xticks(range(len(ops)), [label for _, label in ops])
        ax.set_yscale("log")
        ax.set_ylabel("messages per second (log)")
        ax.set_title(f"{_size(size)} bodies, same run")
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return True


def git_commit(cwd: str | None = None) -> str:
    """The checkout's short commit (``-`` outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=cwd or os.getcwd(),
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return "-"
    return out.stdout.strip() or "-"
