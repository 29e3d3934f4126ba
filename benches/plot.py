"""Plots ``rocketstore bench --json`` output: throughput versus body size.

Usage::

    rocketstore bench --json bench.json
    python benches/plot.py bench.json benches/throughput.png   # also prints a Markdown table

Two panels (log scale, messages per second against body size): writes (rocketstore ``put`` and
``put_batch`` beside the plain-file floor, the mmap ceiling and SQLite) and reads
(``get_message``, ``query_message``, recovery beside SQLite and a plain file read).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

WRITES = [
    ("put_batch", "rocketstore put_batch (Arrow)", "C0", "-", "o"),
    ("put", "rocketstore put (1 call/msg)", "C0", "--", "s"),
    ("mmap_memcpy", "memcpy into mmap (ceiling)", "C2", ":", "^"),
    ("file_write", "file write() (I/O floor)", "C1", ":", "v"),
    ("sqlite_executemany", "SQLite executemany", "C3", "-", "D"),
    ("sqlite_insert", "SQLite INSERT per msg", "C3", "--", "x"),
    ("spark_rocketstore", "Spark write rocketstore", "C4", "-", "P"),
    ("spark_parquet", "Spark write Parquet", "C5", "-", "*"),
]
READS = [
    ("get_message", "rocketstore get_message (32/batch)", "C0", "-", "o"),
    ("query_message", "rocketstore query_message (key)", "C0", "--", "s"),
    ("recovery", "rocketstore abnormal recovery", "C0", ":", "^"),
    ("sqlite_read", "SQLite read (32/batch)", "C3", "-", "D"),
    ("sqlite_lookup", "SQLite lookup by id", "C3", "--", "x"),
    ("file_read", "file readinto() (scan floor)", "C1", ":", "v"),
]


def series(results: list[dict[str, Any]], name: str) -> tuple[list[int], list[float]]:
    pts = sorted(
        (r["size"], r["msgs_per_s"])
        for r in results
        if r["name"] == name and not r.get("skipped") and r.get("msgs_per_s")
    )
    return [p[0] for p in pts], [p[1] for p in pts]


def plot(doc: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = doc["results"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 6.4))
    for ax, lines, title in (
        (axes[0], WRITES, "Writes"),
        (axes[1], READS, "Reads and recovery"),
    ):
        drawn = 0
        for name, label, color, style, marker in lines:
            xs, ys = series(results, name)
            if not xs:
                continue
            ax.plot(xs, ys, color=color, linestyle=style, marker=marker, label=label)
            drawn += 1
        ax.set_xscale("log", base=2)
        sizes = sorted({r["size"] for r in results})
        ax.set_xticks(sizes, [f"{s // 1024} KiB" if s % 1024 == 0 else f"{s} B" for s in sizes])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_xlabel("body size (bytes)")
        ax.set_ylabel("messages per second")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if drawn:
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    m = doc.get("machine", {})
    fig.suptitle(
        f"rocketstore bench: {m.get('cpus', '?')} CPUs ({m.get('cpu', '')}), "
        f"{m.get('mem_gb', '?')} GB, load {m.get('loadavg', '?')}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def markdown(doc: dict[str, Any]) -> str:
    """The results as a Markdown table (what BENCHMARKS.md shows)."""
    rows = [
        "| size | figure | msgs/s | MB/s (bodies) | ratio | baseline | note |",
        "|---:|---|---:|---:|---:|---|---|",
    ]
    for r in doc["results"]:
        if r.get("skipped"):
            why = " ".join(str(r["skipped"]).split()).replace("|", "/")
            rows.append(f"| {r['size']} | {r['name']} | skipped | | | | {why} |")
            continue
        extra = r.get("extra", {})
        note = r.get("note", "")
        if r["name"] == "put_batch" and "of_file_write" in extra:
            note = (
                f"{extra['of_file_write']:.2f}x the file write, "
                f"{extra.get('of_mmap_memcpy', 0):.2f}x the mmap memcpy"
            )
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") is not None else ""
        if r["name"] == "pull_wake":
            rate, mb = "", ""
        else:
            rate, mb = f"{r['msgs_per_s']:,.0f}", f"{r['mb_per_s']:,.1f}"
        rows.append(
            f"| {r['size']} | {r['name']} | {rate} | {mb} | {ratio} | {r.get('baseline') or ''} "
            f"| {note} |"
        )
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if len(argv) < 1:
        print("usage: python benches/plot.py BENCH.json [OUT.png]", file=sys.stderr)
        return 2
    src = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("throughput.png")
    doc = json.loads(src.read_text())
    plot(doc, out)
    print(markdown(doc))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
