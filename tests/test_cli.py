"""The ``rocketstore`` command: help, demo, ingest, verify, inspect, dump, rebuild-indexes.

Spark commands run in-process through ``main([...])`` and reuse the session fixture (the
command sees an active session and neither makes nor stops one).
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import rocketstore
from rocketstore import cli

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Small files; the index size is not recorded in the files, so readers are given it too.
INDEX: dict[str, Any] = {"max_hash_slot_num": 1024, "max_index_num": 4096}
SMALL_STORE: dict[str, Any] = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 300 * 20,
    **INDEX,
}
INDEX_OPTION = [x for k, v in INDEX.items() for x in ("-o", f"{k}={v}")]
INDEX_CONFIG = [x for k, v in INDEX.items() for x in ("-c", f"{k}={v}")]
SMALL_OPTION = [x for k, v in SMALL_STORE.items() for x in ("-o", f"{k}={v}")]
COMMANDS = ("demo", "ingest", "verify", "inspect", "dump", "rebuild-indexes", "bench")


# --------------------------------------------------------------------------------------
# Help
# --------------------------------------------------------------------------------------


def test_console_script_help_explains_every_command() -> None:
    script = Path(sys.executable).parent / "rocketstore"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "rocketstore.cli"]
    proc = subprocess.run(
        [*cmd, "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    for command in COMMANDS:
        assert command in proc.stdout
    assert "examples:" in proc.stdout
    assert "rocketstore verify /data/stores --expected" in proc.stdout
    assert "import pyspark" not in proc.stderr  # --help never needs Spark


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: rocketstore {command}")
    assert len(out.splitlines()) > 5


def test_missing_required_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["ingest", "--store", "x"])
    assert info.value.code == 2
    assert "--input" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# Commands without Spark
# --------------------------------------------------------------------------------------


def _small_store(path: Path) -> Path:
    with rocketstore.MessageStore(path, **SMALL_STORE) as store:
        for i in range(10):
            store.put(
                "Orders",
                b"order %d" % i,
                queue_id=i % 2,
                tags="TagA" if i % 3 else None,
                keys=[f"k{i}"],
            )
        store.put("Orders", b"\xff\xfebinary", queue_id=1)
    return path


def test_demo_without_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "demo"
    rc = cli.main(
        ["demo", "--no-spark", "--store", str(store), "--messages", "3000", "-q",
         "--file-size", str(1 << 20)]
    )  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "-> OK" in out
    assert (store / "commitlog").is_dir()


def test_spark_demo_never_replaces_a_directory_it_did_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("keep me")
    assert cli.main(["demo", "--store", str(precious), "--messages", "10", "-q"]) == 2
    assert "not a demo store directory" in capsys.readouterr().err
    assert (precious / "data.txt").read_text() == "keep me"


def test_inspect_dump_one_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _small_store(tmp_path / "s")
    assert cli.main(["inspect", str(store)]) == 0
    assert "Orders" in capsys.readouterr().out

    assert cli.main(["dump", str(store), "--topic", "Orders", "--queue", "0", "--from", "1"]) == 0
    out = capsys.readouterr().out
    assert "Orders queue 0: offsets 0..4 (5 messages); from 1" in out
    assert "b'order 2'" not in out
    assert "'order 2'" in out
    assert "'order 0'" not in out  # starts at queue offset 1
    assert "keys=k2" in out

    assert cli.main(["dump", str(store), "--topic", "Orders", "--queue", "1", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [m["queue_offset"] for m in lines] == list(range(6))
    assert lines[0]["body"] == "order 1"
    assert lines[0]["keys"] == ["k1"]
    assert lines[0]["tags"] == "TagA"
    assert lines[-1]["body_encoding"] == "base64"

    assert cli.main(["dump", str(store), "--topic", "Orders", "--queue", "1", "--max", "2"]) == 0
    assert capsys.readouterr().out.count("order ") == 2

    # Nothing to dump is "not found" (4), not a failed check (1).
    assert cli.main(["dump", str(store), "--topic", "Nope", "--queue", "0"]) == 4
    assert "no store under" in capsys.readouterr().err


def test_inspect_and_dump_a_directory_of_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    _small_store(root / "store-00000")
    _small_store(root / "store-00001")
    (root / "_temporary" / "x").mkdir(parents=True)  # skipped like the Spark reader does

    assert cli.main(["inspect", str(root)]) == 0
    out = capsys.readouterr().out
    assert "(2 stores; opened read-only)" in out
    assert "store-00000" in out
    assert "store-00001" in out
    assert "manifest         none" in out

    assert cli.main(["inspect", "--json", str(root)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in info["stores"]] == ["store-00000", "store-00001"]

    assert cli.main(["dump", str(root), "--topic", "Orders", "--queue", "0", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {m["store"] for m in lines} == {"store-00000", "store-00001"}


def test_rebuild_indexes_says_when_it_is_not_available(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _small_store(tmp_path / "s")
    monkeypatch.delattr(rocketstore, "rebuild_indexes", raising=False)
    assert cli.main(["rebuild-indexes", str(store)]) == 2
    assert "not available in this build" in capsys.readouterr().err


@pytest.mark.skipif(
    not hasattr(rocketstore, "rebuild_indexes"), reason="rocketstore.rebuild_indexes not built"
)
def test_rebuild_indexes_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _small_store(tmp_path / "s")
    assert cli.main(["rebuild-indexes", str(store), *INDEX_CONFIG]) == 0
    assert "rebuilt in" in capsys.readouterr().out
    with rocketstore.MessageStore(store, read_only=True, **INDEX) as s:
        assert [m.body for m in s.query_message("Orders", "k3")] == [b"order 3"]


# --------------------------------------------------------------------------------------
# Spark commands
# --------------------------------------------------------------------------------------


def _messages(n: int) -> list[dict[str, object]]:
    return [
        {
            "id": i,  # not a put() argument: ignored
            "topic": f"T{i % 3}",
            "queue_id": i % 4,
            "tags": ["a", "b", None][i % 3],
            "keys": f"key-{i}",
            "body": f"body of message {i} " + "x" * (i % 50),
        }
        for i in range(n)
    ]


def _write_parquet(path: Path, rows: list[dict[str, object]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_ingest_verify_inspect_dump_parquet(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_parquet(tmp_path / "msgs.parquet", _messages(300))
    root = tmp_path / "root"
    rc = cli.main(
        ["ingest", "--input", str(src), "--store", str(root), "--stores", "2", "-q",
         *SMALL_OPTION]
    )  # fmt: skip
    assert rc == 0
    captured = capsys.readouterr()
    assert "ignoring input columns id" in captured.err
    assert "ingest: 300 messages" in captured.out
    assert "store-00000, store-00001" in captured.out

    report = tmp_path / "report" / "verify.json"
    rc = cli.main(
        ["verify", str(root), "--expected", str(src), "--report", str(report), "-q",
         *INDEX_OPTION]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "ALL CHECKS PASSED" in out
    assert json.loads(report.read_text())["ok"] is True
    assert report.with_suffix(".png").exists()

    assert cli.main(["verify", str(root), "--json", "-q", *INDEX_OPTION]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["messages"] == 300
    assert data["checks"]["source"]["status"] == "not run"

    assert cli.main(["inspect", str(root)]) == 0
    out = capsys.readouterr().out
    assert "manifest         _SUCCESS: 300 messages" in out

    assert cli.main(["dump", str(root), "--topic", "T0", "--queue", "0", "--json"]) == 0
    dumped = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(dumped) == 20  # --max default
    assert all(m["body"].startswith("body of message ") for m in dumped)


def test_ingest_json_and_csv_inputs(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _messages(120)
    src_json = tmp_path / "msgs.json"
    with src_json.open("w") as f:
        for r in rows:
            f.write(json.dumps({**r, "properties": {"source": "json"}}) + "\n")
    src_csv = tmp_path / "msgs.csv"
    with src_csv.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

    for src in (src_json, src_csv):
        root = tmp_path / f"root-{src.suffix[1:]}"
        rc = cli.main(["ingest", "--input", str(src), "--store", str(root), "-q", *SMALL_OPTION])
        assert rc == 0
        capsys.readouterr()
        rc = cli.main(
            ["verify", str(root), "--expected", str(src), "-q", "--sample-keys", "10",
             *INDEX_OPTION]
        )  # fmt: skip
        out = capsys.readouterr().out
        assert rc == 0, out
        assert "source         ok" in out

    with rocketstore.MessageStore(root / "store-00000", read_only=True) as s:
        assert s.consume_queues()


def test_verify_exits_nonzero_when_a_check_fails(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _messages(100)
    src = _write_parquet(tmp_path / "msgs.parquet", rows)
    more = _write_parquet(tmp_path / "more.parquet", [*rows, {**rows[5], "body": "lost"}])
    root = tmp_path / "root"
    assert cli.main(["ingest", "--input", str(src), "--store", str(root), "-q", *SMALL_OPTION]) == 0
    capsys.readouterr()

    rc = cli.main(["verify", str(root), "--expected", str(more), "-q", *INDEX_OPTION])
    out = capsys.readouterr().out
    assert rc == 1
    assert "source         FAILED" in out
    assert "missing from the stores" in out
    assert "VERIFICATION FAILED" in out

    shutil.rmtree(root / "store-00000" / "consumequeue")  # every unit of this store is gone
    rc = cli.main(["verify", str(root), "-q", *INDEX_OPTION])
    out = capsys.readouterr().out
    assert rc == 1
    assert "consume_queue  FAILED" in out


def test_spark_demo_small(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "demo-store"
    rc = cli.main(
        ["demo", "--store", str(store), "--messages", "4000", "--stores", "2", "-q",
         "--file-size", str(1 << 20)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "ALL CHECKS PASSED" in out
    assert "ingest: 4,000 messages" in out
    assert "throughput: ingest" in out
    assert (store / "_report" / "verify.json").exists()
    assert (store / "_report" / "verify.png").exists()
    # Running it again replaces the stores (overwrite), including a --no-spark store.
    shutil.rmtree(store)
    small = ["--file-size", str(1 << 20), "-q"]
    assert cli.main(["demo", "--no-spark", "--store", str(store), "--messages", "10", *small]) == 0
    rc = cli.main(["demo", "--store", str(store), "--messages", "500", "--stores", "1", *small])
    assert rc == 0
    assert sorted(p.name for p in store.iterdir() if p.name.startswith("store-")) == ["store-00000"]
