"""``rocketstore bench --smoke`` runs every figure end to end (no timing assertions): the
baselines, the peers (``--peers``), the growth with size (``--scale``), and the page's tables
(``--markdown``) and plot (``--plot``) written from its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketstore import _bench, _bench_peers, _bench_report
from rocketstore.cli import main


def test_bench_smoke_runs_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "bench.json"
    page = tmp_path / "BENCHMARKS.md"
    page.write_text(
        "# prose kept\n\n<!-- BEGIN bench:write -->\nold table\n<!-- END bench:write -->\n"
        "\nmore prose\n"
    )
    rc = main(
        [
            "bench",
            "--smoke",
            "-q",
            "--peers",
            "--scale",
            "--dir",
            str(tmp_path / "work"),
            "--json",
            str(out),
            "--markdown",
            str(page),
        ]
    )
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

    # --peers: every system and operation, for each size: measured, or skipped with the
    # package to install; the ones measured found every key they looked up.
    for system, _label, _module, _pip in _bench_peers.PEERS:
        for op in ("append", "read", "lookup", "disk"):
            for size in (100, 1024):
                r = next(
                    x
                    for x in results
                    if x["name"] == _bench_peers.fig_name(system, op) and x["size"] == size
                )
                if r["skipped"]:
                    assert "pip install" in r["skipped"]
                    continue
                assert r["messages"] > 0, r
                if op == "disk":
                    assert r["extra"]["bytes"] > 0
                else:
                    assert r["cpu_seconds"] > 0 or r["seconds"] > 0
                if op == "lookup":
                    assert "not found" not in r["note"], r
    for system in ("rocketstore", "sqlite", "parquet"):  # no extra package needed
        assert not next(x for x in results if x["name"] == _bench_peers.fig_name(system, "append"))[
            "skipped"
        ]
    body = next(x for x in results if x["name"] == "peers_rocketstore_read_body")
    assert body["skipped"] or body["body_bytes"] > 0

    # --scale: two tiny stores, every figure of each.
    scale = doc["scale"]
    assert [s["gib"] for s in scale] == [1, 2]
    for s in scale:
        for k in ("put_first", "put_last", "read_first", "read_last", "query_first"):
            rate, cpu = s[k]
            assert rate > 0, (k, s[k])
            assert cpu >= 0, (k, s[k])
        assert s["crash_paused"]["end"] > 0

    # --markdown: the block in the page is replaced, the prose kept, the others appended.
    text = page.read_text()
    assert "# prose kept" in text
    assert "more prose" in text
    assert "old table" not in text
    for name, _heading, _command in _bench_report.SECTIONS:
        assert text.count(f"<!-- BEGIN bench:{name} -->") == 1, name
    assert "LMDB" in text
    assert "GiB" in text

    # --from-json: the same tables again from the JSON alone, nothing measured.
    again = tmp_path / "again.md"
    again.write_text(text)
    assert main(["bench", "--from-json", str(out), "--markdown", str(again)]) == 0
    assert again.read_text() == text

    # Everything the run created under --dir is gone again.
    assert not any((tmp_path / "work").iterdir())


def test_messages_for_caps_bytes() -> None:
    opts = _bench.BenchOptions(max_mb=256)
    assert opts.messages_for(100) == 1_000_000
    assert opts.messages_for(4096) == 256_000_000 // 4096
    assert _bench.BenchOptions(messages=5).messages_for(4096) == 5


def _doc() -> dict[str, object]:
    results = []
    for size in (100, 1024):
        for i, (system, *_rest) in enumerate(_bench_peers.PEERS):
            for op in ("append", "read", "lookup"):
                f = _bench.Figure(
                    _bench_peers.fig_name(system, op), size, 1000, 0.01 * (i + 1), 1000 * size
                )
                f.cpu_seconds = 0.005
                results.append(f.to_json())
            disk = _bench.Figure(_bench_peers.fig_name(system, "disk"), size, 1000)
            disk.extra["bytes"] = 4096 * (i + 1)
            results.append(disk.to_json())
    results.append(_bench.Figure("sqlite_read", 100, skipped="not here").to_json())
    return {"machine": _bench.machine_info(), "results": results, "scale": []}


def test_markdown_from_json_writes_every_block(tmp_path: Path) -> None:
    page = tmp_path / "B.md"
    doc = _doc()
    _bench_report.write_markdown(doc, page)
    first = page.read_text()
    for name, heading, _command in _bench_report.SECTIONS:
        assert f"<!-- BEGIN bench:{name} -->" in first
        assert heading in first
    # A second run replaces the tables in place: the page does not grow.
    _bench_report.write_markdown(doc, page)
    assert page.read_text() == first


def test_plot_from_json(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "peers.png"
    assert _bench_report.plot_peers(_doc(), png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_from_json_reports_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["bench", "--from-json", str(bad), "--markdown", str(tmp_path / "m.md")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["bench", "--from-json", str(bad)]) == 2


def test_disk_bytes_counts_blocks_not_length(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as fh:
        fh.truncate(64 << 20)  # a hole: no block
    dense = tmp_path / "dense"
    dense.write_bytes(b"x" * 8192)
    assert _bench_peers.disk_bytes(tmp_path) < 1 << 20
    assert _bench_peers.disk_bytes(tmp_path) >= 8192


def test_bench_follow_smoke(tmp_path: Path) -> None:
    """``--follow``: a reader process woken by the writer, idle, tailing (no timing asserted)."""
    from rocketstore._bench_follow import run_follow

    figs = run_follow(tmp_path, lambda _m: None, rounds=20, seconds=0.1, tail=3000)
    by = {f.name: f for f in figs}
    assert set(by) == {
        "follow_wake",
        "pull_wake_local",
        "follow_idle",
        "follow_tail",
        "follow_write",
    }
    assert by["follow_wake"].messages == 20
    assert by["follow_wake"].extra["p99_us"] >= by["follow_wake"].extra["p50_us"]
    assert by["follow_tail"].messages == 3000
    assert by["follow_idle"].extra["idle_cpu_pct"] >= 0
    doc = {"results": [f.to_json() for f in figs]}
    text = _bench_report.render(doc)["follow"]
    assert "p99.9" in text
    assert not any(tmp_path.iterdir())


def test_spark_sink_and_remote_tables_from_json() -> None:
    """The sink's row stands beside the batch writer's, the S3 rows beside Parquet's."""
    from rocketstore._bench_remote import REMOTE_NAMES

    figs = []
    for i, name in enumerate(
        ["spark_parquet", "spark_rocketstore", "spark_batch_files", "spark_sink"]
    ):
        f = _bench.Figure(name, 1024, 4000, 1.0 + i, 4000 * 1024, cpu_seconds=2.0)
        figs.append(f)
    for i, name in enumerate(REMOTE_NAMES):
        f = _bench.Figure(name, 256, 2000, 1.0 + i, 2000 * 256, cpu_seconds=1.0)
        f.extra["server_cpu_seconds"] = 0.5
        figs.append(f)
    figs[-3].extra["stored_bytes"] = 16_500_000  # remote_write_parquet
    _bench._link(figs)
    blocks = _bench_report.render({"results": [f.to_json() for f in figs]})
    spark = blocks["spark"]
    assert "writeStream" in spark
    sink_row = next(line for line in spark.splitlines() if "writeStream" in line)
    assert "| 1.0 k/s | 500,000 | 1.3 k/s |" in sink_row  # 4000 / 4 s beside 4000 / 3 s
    assert "0.75x" in sink_row
    remote = blocks["remote"]
    assert "`s3a://`" in remote
    assert "Parquet 16.5 MB" in remote
    assert "250,000" in remote  # server CPU ns/msg: 0.5 s over 2,000 rows
    assert all(line.count("|") == 6 for line in remote.splitlines() if line.startswith("|"))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_bench_remote_and_sink_run(tmp_path: Path) -> None:
    """``--remote`` and the sink figures of ``--spark`` measure on a real session (small)."""
    pytest.importorskip("pyspark")
    pytest.importorskip("moto")
    from rocketstore._bench_remote import REMOTE_NAMES, run_remote

    figs = run_remote(tmp_path, lambda _m: None, messages=3000)
    assert [f.name for f in figs] == list(REMOTE_NAMES)
    for f in figs:
        assert not f.skipped, f.skipped
        assert f.messages == 3000
        assert f.seconds > 0
    assert {f.name: f for f in figs}["remote_write"].extra["stored_bytes"] > 0
    spark = _bench.bench_spark_session("rocketstore-bench-test")
    try:
        table = _bench.spark_input_table(_bench.bench_table(3000, 1024))
        df = spark.createDataFrame(table).repartition(2).cache()
        data = _bench._Data(1024, table, 3000, 3000 * 1024, [], [])
        by = {f.name: f for f in _bench._spark_sink(spark, tmp_path, df, data)}
    finally:
        spark.stop()
    for name in ("spark_batch_files", "spark_sink"):
        assert not by[name].skipped, by[name].skipped
        assert by[name].messages == 3000
    assert not any(tmp_path.iterdir())
