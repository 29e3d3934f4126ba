"""``rocketstore bench --smoke`` runs every figure end to end (no timing assertions), and
``benches/plot.py`` draws its JSON."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from rocketstore import _bench
from rocketstore.cli import main

REPO = Path(__file__).resolve().parent.parent


def test_bench_smoke_runs_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "bench.json"
    rc = main(["bench", "--smoke", "-q", "--dir", str(tmp_path / "work"), "--json", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    results = doc["results"]
    names = {r["name"] for r in results}
    # The write path and every baseline always run; read-path figures may be skipped (with a
    # reason) by a binding that lacks the method, but never silently missing.
    for name in (
        "put",
        "put_batch",
        "file_write",
        "mmap_memcpy",
        "sqlite_executemany",
        "sqlite_insert",
        "sqlite_read",
        "sqlite_lookup",
        "sqlite_lookup_batch",
        "file_read",
        "recovery",
        "get_message",
        "pull_wake",
        "query_message",
        "query_messages",
    ):
        assert name in names, name
        assert name in printed
    for r in results:
        assert r["skipped"] or r["messages"] > 0, r
    put_batch = [r for r in results if r["name"] == "put_batch"]
    assert {r["size"] for r in put_batch} == {100, 1024}
    for r in put_batch:
        assert r["baseline"] == "sqlite_executemany"
        assert r["ratio"] is not None
        assert "note" in r
        assert r["extra"]["record_bytes"] > r["body_bytes"]
    recovery = [r for r in results if r["name"] == "recovery"]
    assert all(r["extra"]["abnormal"] for r in recovery)
    # Everything the run created under --dir is gone again.
    assert not any((tmp_path / "work").iterdir())


def test_messages_for_caps_bytes() -> None:
    opts = _bench.BenchOptions(max_mb=256)
    assert opts.messages_for(100) == 1_000_000
    assert opts.messages_for(4096) == 256_000_000 // 4096
    assert _bench.BenchOptions(messages=5).messages_for(4096) == 5


def test_plot_from_json(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    results = [
        _bench.Figure("put_batch", size, 1000, 0.01 * size / 100, 1000 * size).to_json()
        for size in (100, 1024)
    ] + [_bench.Figure("sqlite_read", 100, skipped="not here").to_json()]
    src = tmp_path / "b.json"
    src.write_text(json.dumps({"machine": _bench.machine_info(), "results": results}))
    png = tmp_path / "t.png"
    plot = runpy.run_path(str(REPO / "benches" / "plot.py"))
    assert plot["main"]([str(src), str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
