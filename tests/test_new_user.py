"""What a new user hit (issue 43): one test (or a few) per item, named after it.

1. ``verify --no-spark`` and ``rocketstore.spark.verify_local`` without PySpark.
2. The verify report's plot: written with matplotlib, a clear note without it.
3. CLI errors: one line, a distinct exit status per kind, documented in ``--help``.
4. ``dump --json`` shows ``sys_flag``; ``--decompress``.
5. ``inspect`` of a store a writer holds says so.
6. Error texts name what to change.
7. CLI consistency: ``-c/--config`` everywhere, ``--json``, no ``\\r`` bars off a terminal,
   rates with their digits, ``demo --no-spark``'s figures.
8. ``put(compression=)``, ``put_batch`` of a generator, iterable ``GetResult``, enum
   ``PutResult.status``, ``ScanIterator`` repr, ``decompress=`` on reads.
9. ``flush()`` makes every earlier put visible to queue and key reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import rocketstore
from rocketstore import cli
from rocketstore.exceptions import (
    InvalidConfigError,
    MessageTooLargeError,
    StoreLockedError,
)

SMALL: dict[str, Any] = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 300 * 20,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
}
SMALL_CONFIG = [x for k, v in SMALL.items() for x in ("-c", f"{k}={v}")]
ZSTD = rocketstore.compress_body(b"x", "zstd")[1]  # bit 0 + the codec in bits 8-10


def _store(path: Path, n: int = 6, *, compressed: bool = False) -> Path:
    with rocketstore.MessageStore(path, **SMALL) as s:
        for i in range(n):
            s.put("Orders", f"order {i}".encode(), queue_id=0, tags="TagA", keys=[f"k{i}"])
        if compressed:
            s.put("Orders", b"z" * 5000, queue_id=0, compression="zstd")
    return path


def _run(code: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` in a fresh interpreter (``sys.argv[1:] == args``)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )


#: Makes ``import pyspark`` (and ``matplotlib`` with ``BLOCK=pyspark,matplotlib``) fail, as
#: in an environment where they are not installed, then runs the ``rocketstore`` command.
_WITHOUT = """
import importlib.abc, os, sys

BLOCK = set(os.environ["BLOCK"].split(","))

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
from rocketstore import cli
status = cli.main(sys.argv[1:])
assert not any(m.split(".")[0] in BLOCK for m in sys.modules), "a blocked module was imported"
sys.exit(status)
"""


def _cli_without(blocked: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BLOCK": blocked}
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


# --------------------------------------------------------------------------------------
# 1. verify without PySpark
# --------------------------------------------------------------------------------------


def test_1_verify_no_spark_runs_without_pyspark(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    proc = _cli_without("pyspark", "verify", "--no-spark", str(store), *SMALL_CONFIG)
    assert proc.returncode == 0, proc.stderr
    assert "crc" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_1_spark_verify_local_is_importable_without_pyspark(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    code = """
    import sys
    sys.modules["pyspark"] = None  # not installed
    import rocketstore.spark
    from rocketstore.spark import verify_local
    config = {k: int(v) for k, v in (a.split("=") for a in sys.argv[2:])}
    report = verify_local(sys.argv[1], **config)
    assert report.ok, report.failed_checks
    try:
        rocketstore.spark.ingest
    except ImportError as e:
        assert "pip install 'rocketstore[spark]'" in str(e), e
    else:
        raise AssertionError("ingest without PySpark")
    print("ok")
    """
    proc = _run(code, str(store), *(f"{k}={v}" for k, v in SMALL.items()))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


# --------------------------------------------------------------------------------------
# 2. the verify report's plot
# --------------------------------------------------------------------------------------


def test_2_verify_report_plot_or_a_note_without_matplotlib(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    report = tmp_path / "r" / "verify.json"
    args = ["verify", "--no-spark", str(store), "--report", str(report), *SMALL_CONFIG]

    proc = _cli_without("pyspark,matplotlib", *args)
    assert proc.returncode == 0, proc.stderr
    assert report.exists()
    assert not report.with_suffix(".png").exists()
    assert "no verify.png: the plot needs matplotlib" in proc.stdout

    pytest.importorskip("matplotlib")
    proc = _cli_without("pyspark", *args)
    assert proc.returncode == 0, proc.stderr
    assert report.with_suffix(".png").stat().st_size > 0
    assert f"report: {report} and {report.with_suffix('.png')}" in proc.stdout

    # A plot left by an earlier run is removed when no new one can be drawn.
    proc = _cli_without("pyspark,matplotlib", *args)
    assert proc.returncode == 0, proc.stderr
    assert not report.with_suffix(".png").exists()


def test_2_spark_extra_installs_matplotlib() -> None:
    import tomllib

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("matplotlib") for dep in extras["spark"])


# --------------------------------------------------------------------------------------
# 3. CLI errors: one line, distinct exit statuses
# --------------------------------------------------------------------------------------


def _one_line_error(proc: subprocess.CompletedProcess[str], command: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"rocketstore {command}: "), lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_3_verify_no_spark_of_a_missing_path_is_not_found(tmp_path: Path) -> None:
    proc = _cli_without("pyspark", "verify", "--no-spark", str(tmp_path / "nonexistent"))
    assert proc.returncode == 4  # not found; 1 means "a check failed"
    assert "no such file or directory" in _one_line_error(proc, "verify")


def test_3_exit_statuses_are_distinct_and_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "s")
    cases: list[tuple[list[str], int]] = [
        (["inspect", str(tmp_path / "nope")], 4),
        (["dump", str(store), "--topic", "Nope", "--queue", "0", *SMALL_CONFIG], 4),
        (["inspect", str(store), "-c", "mapped_file_size_commit_log"], 2),
        (["inspect", str(store), "-c", "max_index_num=x"], 2),
        (["inspect", str(store), "-c", "no_such_setting=1"], 3),
    ]
    with rocketstore.MessageStore(tmp_path / "held", **SMALL):
        # A writer holds it: rebuilding its indexes is refused by the store (3).
        cases.append((["rebuild-indexes", str(tmp_path / "held"), *SMALL_CONFIG], 3))
        for argv, status in cases:
            assert cli.main(argv) == status, argv
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1, err
            assert err[0].startswith(f"rocketstore {argv[0]}: "), err


def test_3_unreadable_directory_is_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "s")
    if os.geteuid() != 0:
        store.chmod(0)
        try:
            assert cli.main(["inspect", str(store)]) == 5
        finally:
            store.chmod(0o755)
    else:  # root reads every directory: the same failure, raised where the open would
        from rocketstore.cli import _tools

        def unreadable(root: Any, **config: Any) -> Any:
            raise PermissionError(13, "Permission denied", str(root))

        monkeypatch.setattr(_tools, "inspect_store", unreadable)
        assert cli.main(["inspect", str(store)]) == 5
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rocketstore inspect: PermissionError: Permission denied: {store}"]


def test_3_internal_errors_are_one_line_unless_debugging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rocketstore.cli import _tools

    def bug(root: Any, **config: Any) -> Any:
        raise KeyError("a bug")

    store = _store(tmp_path / "s")
    monkeypatch.setattr(_tools, "inspect_store", bug)
    monkeypatch.delenv("ROCKETSTORE_DEBUG", raising=False)
    assert cli.main(["inspect", str(store)]) == 70
    assert "ROCKETSTORE_DEBUG=1" in capsys.readouterr().err
    monkeypatch.setenv("ROCKETSTORE_DEBUG", "1")
    with pytest.raises(KeyError):
        cli.main(["inspect", str(store)])


def test_3_help_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "exit status:" in out
    for status in ("0", "1", "2", "3", "4", "5", "6", "7", "70", "130", "141"):
        assert f"  {status} " in out, status


# --------------------------------------------------------------------------------------
# 4. dump: sys_flag and --decompress
# --------------------------------------------------------------------------------------


def test_4_dump_json_shows_sys_flag_and_decompresses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "s", n=1, compressed=True)
    base = ["dump", str(store), "--topic", "Orders", "--queue", "0", "--json", *SMALL_CONFIG]

    assert cli.main(base) == 0
    plain, packed = (json.loads(x) for x in capsys.readouterr().out.splitlines())
    assert plain["sys_flag"] == 0
    assert plain["body_compressed"] is False
    assert packed["sys_flag"] == ZSTD
    assert packed["body_compressed"] is True
    assert packed["body_encoding"] == "base64"  # the compressed bytes, as stored

    assert cli.main([*base, "--decompress"]) == 0
    _, unpacked = (json.loads(x) for x in capsys.readouterr().out.splitlines())
    assert unpacked["body"] == "z" * 5000
    assert unpacked["body_decompressed"] is True
    assert unpacked["body_compressed"] is False
    assert unpacked["sys_flag"] == 0
    assert unpacked["stored_sys_flag"] == ZSTD

    assert cli.main(base[: -1 - len(SMALL_CONFIG)] + SMALL_CONFIG) == 0
    assert "--decompress shows it decompressed" in capsys.readouterr().out


# --------------------------------------------------------------------------------------
# 5. inspect of a store a writer holds
# --------------------------------------------------------------------------------------


def test_5_inspect_says_the_store_is_in_use_by_a_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "live"
    with rocketstore.MessageStore(path, **SMALL) as s:
        s.put("Orders", b"x")
        s.flush()
        assert cli.main(["inspect", str(path), *SMALL_CONFIG]) == 0
        out = capsys.readouterr().out
        assert "in use           yes: a writer holds this store" in out
        assert "ABNORMAL" not in out
        assert "removed" not in out
        assert cli.main(["inspect", str(path), "--json", *SMALL_CONFIG]) == 0
        assert json.loads(capsys.readouterr().out)["in_use"] is True
    assert cli.main(["inspect", str(path), *SMALL_CONFIG]) == 0
    out = capsys.readouterr().out
    assert "in use" not in out
    assert "recovery         clean" in out


# --------------------------------------------------------------------------------------
# 6. error texts
# --------------------------------------------------------------------------------------


def test_6_a_second_writer_is_told_about_read_only(tmp_path: Path) -> None:
    with rocketstore.MessageStore(tmp_path / "s", **SMALL):
        with pytest.raises(StoreLockedError) as info:
            rocketstore.MessageStore(tmp_path / "s", **SMALL)
        text = str(info.value)
        assert "another open handle in this process" in text
        assert "read_only=True" in text
        with rocketstore.MessageStore(tmp_path / "s", read_only=True, **SMALL) as ro:
            assert ro.max_commitlog_offset() == 0


def test_6_too_large_names_the_keyword(tmp_path: Path) -> None:
    with (
        rocketstore.MessageStore(tmp_path / "s", max_message_size=1024) as s,
        pytest.raises(MessageTooLargeError, match=r"max_message_size"),
    ):
        s.put("T", b"x" * 2048)


def test_6_ranges_are_not_printed_in_rust_syntax(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError) as info:
        rocketstore.MessageStore(tmp_path / "s", mapped_file_size_commit_log=1)
    assert "..=" not in str(info.value)
    assert ".." not in str(info.value)
    assert "outside the range 4096 to" in str(info.value)


def test_6_type_errors_name_the_argument(tmp_path: Path) -> None:
    with rocketstore.MessageStore(tmp_path / "s", **SMALL) as s:
        with pytest.raises(TypeError, match=r"^queue_id must be int, not str"):
            s.put("T", b"x", queue_id="1")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^queue_id must be int, not str"):
            s.get_message("T", "1", 0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^offset must be int, not NoneType"):
            s.pull("T", 0, None, timeout_ms=0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^key must be str, not NoneType"):
            s.query_message("T", key=None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^born_timestamp must be int, not str"):
            s.put("T", b"x", born_timestamp="now")  # type: ignore[arg-type]
        # The argument is still optional, and None still means "now".
        assert s.put("T", b"x", born_timestamp=None).ok


def test_6_spark_option_suggestions_keep_their_spelling() -> None:
    from rocketstore.spark._options import split_options

    with pytest.raises(InvalidConfigError) as info:
        split_options({"mappedFileSizeCommitLg": "1024"}, ("queueSelector",), what="writer")
    assert "mappedFileSizeCommitLog" in info.value.suggestions
    assert "did you mean mappedFileSizeCommitLog" in str(info.value)
    with pytest.raises(InvalidConfigError) as info:
        split_options({"queueSelectr": "hash"}, ("queueSelector",), what="writer")
    assert info.value.suggestions[0] == "queueSelector"


# --------------------------------------------------------------------------------------
# 7. CLI consistency
# --------------------------------------------------------------------------------------


def test_7_config_and_option_are_one_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "s")
    dash_o = [x.replace("-c", "-o") for x in SMALL_CONFIG]
    for argv in (["inspect", str(store)], ["verify", "--no-spark", str(store)]):
        for flags in (SMALL_CONFIG, dash_o):
            assert cli.main([*argv, *flags]) == 0, (argv, flags)
    capsys.readouterr()
    for command in ("inspect", "dump", "verify", "ingest", "rebuild-indexes"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        assert "-c KEY=VALUE, --config KEY=VALUE" in out, command
        assert "--option" not in out, command  # the hidden alias


def test_7_rebuild_indexes_and_demo_have_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "s")
    assert cli.main(["rebuild-indexes", str(store), "--json", *SMALL_CONFIG]) == 0
    [row] = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert row["store"] == str(store)
    assert row["records"] == 6

    demo = ["demo", "--no-spark", "--json", "--store", str(tmp_path / "d"), "--messages", "500"]
    assert cli.main(demo) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ok"] is True
    assert summary["read_back"] == 500


def test_7_no_progress_bars_off_a_terminal(tmp_path: Path) -> None:
    code = "import sys; from rocketstore import cli; sys.exit(cli.main(sys.argv[1:]))"
    proc = _run(code, "demo", "--no-spark", "--store", str(tmp_path / "d"), "--messages", "3000")
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr
    assert "\r" not in proc.stdout


def test_7_rates_keep_their_digits() -> None:
    from rocketstore.cli._demo import fmt_per_second

    assert fmt_per_second(2 / 6.0) == "0.333"  # "2 messages ... = 0 msg/s" was printed
    assert fmt_per_second(12.34) == "12.3"
    assert fmt_per_second(1_234_567.8) == "1,234,568"


def test_7_demo_no_spark_bar_and_summary_time_the_same_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rocketstore.cli import _demo
    from rocketstore.cli._progress import Progress

    seen: dict[str, float] = {}

    class Bar(Progress):
        def __exit__(self, *exc: Any) -> None:
            import time

            seen[self.desc.strip()] = time.perf_counter() - self.start

    monkeypatch.setattr(_demo, "Progress", Bar)
    argv = ["demo", "--no-spark", "--json", "--store", str(tmp_path / "d"), "--messages", "4000"]
    assert cli.main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    # The summary's seconds are the loop the bar showed (the bar also covers its own set-up).
    for bar, key in (("put_batch", "put_batch_seconds"), ("scan", "scan_seconds")):
        assert 0 < summary[key] <= seen[bar]
        assert summary[key] >= 0.5 * seen[bar] - 0.01


# --------------------------------------------------------------------------------------
# 8. the Python API
# --------------------------------------------------------------------------------------


def test_8_put_compression_and_decompress_on_every_read(tmp_path: Path) -> None:
    body = b"compress me " * 1000
    with rocketstore.MessageStore(tmp_path / "s", **SMALL) as s:
        r = s.put("T", body, keys=["k"], compression="zstd")
        small = s.put("T", b"tiny", compression="zstd")  # under compress_over: as given
        s.flush()
        stored = s.look_message_by_offset(r.commitlog_offset)
        assert stored.sys_flag == ZSTD
        assert stored.body != body
        assert s.look_message_by_offset(small.commitlog_offset).sys_flag == 0

        def plain(m: rocketstore.Message) -> bool:
            return m.body == body and m.sys_flag == 0

        assert plain(stored.decompressed())
        assert plain(s.look_message_by_offset(r.commitlog_offset, decompress=True))
        assert plain(s.view_message_by_id(r.msg_id, decompress=True))
        assert plain(s.get_message("T", 0, 0, decompress=True).messages[0])
        assert plain(s.pull("T", 0, 0, timeout_ms=0, decompress=True).messages[0])
        assert plain(s.query_message("T", "k", decompress=True)[0])
        assert plain(s.query_messages("T", ["k"], decompress=True)[0][0])
        assert plain(next(iter(s.scan(decompress=True))))
        assert plain(s.scan(decompress=True).next_batch(1)[0])
        batch, _ = s.read_arrow(0, decompress=True)
        assert batch.column("body")[0].as_py() == body
        assert batch.column("sys_flag").to_pylist() == [0, 0]
        batch, _ = s.get_message_arrow("T", 0, 0, columns=["body"], decompress=True)
        assert batch.schema.names == ["body"]
        assert batch.column("body").to_pylist() == [body, b"tiny"]
        # Not asked: bodies as stored.
        assert s.get_message("T", 0, 0).messages[0].sys_flag == ZSTD


def test_8_put_batch_takes_a_generator(tmp_path: Path) -> None:
    with rocketstore.MessageStore(tmp_path / "s", **SMALL) as s:
        results = s.put_batch({"topic": "T", "body": b"%d" % i} for i in range(5))
        assert [r.queue_offset for r in results] == list(range(5))
        with pytest.raises(TypeError, match="iterable of dicts"):
            s.put_batch("not messages")  # type: ignore[arg-type]


def test_8_results_are_iterable_typed_and_readable(tmp_path: Path) -> None:
    with rocketstore.MessageStore(tmp_path / "s", **SMALL) as s:
        r = s.put("T", b"a")
        assert r.status is rocketstore.PutMessageStatus.PUT_OK
        assert r.status == "PUT_OK"  # a str enum, like GetResult.status
        s.put("T", b"b")
        s.flush()
        got = s.get_message("T", 0, 0)
        assert [m.body for m in got] == [b"a", b"b"]
        assert len(got) == 2
        it = s.scan(verify_crc=True)
        text = repr(it)
        assert text.startswith("ScanIterator(store=")
        assert "offset=0" in text
        assert "verify_crc=True" in text
        next(it)
        assert f"offset={got.messages[1].commitlog_offset}" in repr(it)


# --------------------------------------------------------------------------------------
# 9. visibility
# --------------------------------------------------------------------------------------


def test_9_after_flush_an_immediate_read_always_sees_the_put(tmp_path: Path) -> None:
    with rocketstore.MessageStore(tmp_path / "s") as s:
        for i in range(200):
            r = s.put("T", b"%d" % i, queue_id=i % 4, keys=[f"k{i}"])
            s.flush()
            got = s.get_message("T", i % 4, r.queue_offset, 1)
            assert [m.body for m in got] == [b"%d" % i], i
            assert [m.commitlog_offset for m in s.query_message("T", f"k{i}")] == [
                r.commitlog_offset
            ]
            batch, _ = s.get_message_arrow("T", i % 4, r.queue_offset, 1, columns=["body"])
            assert batch.column("body").to_pylist() == [b"%d" % i]
