"""Spark's Python workers and the interpreter a user's script runs with.

* ``import rocketstore.spark`` before the SparkContext makes the workers run this interpreter
  when ``PYSPARK_PYTHON`` is unset, and leaves any value the user set alone.
* A context that already runs its workers with an interpreter lacking rocketstore gets a
  data source that fails on the driver, before any task, with an error that names that
  interpreter and what to set, never a worker's ``ModuleNotFoundError`` traceback.

The end-to-end tests run scripts in subprocesses the way cron or an IDE does: the dev venv's
interpreter by path, its ``bin`` not on ``PATH``, no ``PYSPARK_PYTHON``, and a decoy
``python3`` (an interpreter without rocketstore) first on ``PATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tests.conftest import skip_or_fail
from tests.isolated import bare_venv, decoy_path, run_job, unactivated_env

import rocketstore
from rocketstore.spark import _interpreter


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An interpreter (same Python, new venv) that has neither rocketstore nor pyarrow."""
    return bare_venv(tmp_path_factory.mktemp("bare") / "venv")


def _java_or_skip() -> None:
    from tests.conftest import _java_major_version

    major = _java_major_version()
    if major is None or major < 17:
        skip_or_fail(f"needs Java 17+ (found {major})")


# --------------------------------------------------------------------------------------
# default_worker_python: sets PYSPARK_PYTHON only when nothing else decided
# --------------------------------------------------------------------------------------


@pytest.fixture
def no_context(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)


@pytest.mark.usefixtures("no_context")
def test_default_worker_python_sets_this_interpreter_when_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert _interpreter.default_worker_python() is True
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


@pytest.mark.usefixtures("no_context")
def test_default_worker_python_keeps_a_users_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "./environment/bin/python")
    assert _interpreter.default_worker_python() is False
    assert os.environ["PYSPARK_PYTHON"] == "./environment/bin/python"


@pytest.mark.usefixtures("no_context")
def test_default_worker_python_leaves_spark_submit_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # spark-submit starts the Python driver with the JVM's gateway port in the environment;
    # its spark.pyspark.python (or its absence, e.g. on a cluster) decides.
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    assert _interpreter.default_worker_python() is False
    assert "PYSPARK_PYTHON" not in os.environ


def test_default_worker_python_is_too_late_for_a_running_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pyspark import SparkContext

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setattr(SparkContext, "_active_spark_context", object())
    assert _interpreter.default_worker_python() is False
    assert "PYSPARK_PYTHON" not in os.environ


# --------------------------------------------------------------------------------------
# worker_python_problem: asks the workers' interpreter (no Spark needed)
# --------------------------------------------------------------------------------------


def _fake_session(python_exec: str, conf: dict[str, str] | None = None) -> Any:
    sc = SimpleNamespace(
        pythonExec=python_exec,
        environment={},
        getConf=lambda: SimpleNamespace(get=(conf or {}).get),
    )
    return SimpleNamespace(_sc=sc)


def test_no_problem_when_workers_run_this_interpreter() -> None:
    assert _interpreter.worker_python_problem(_fake_session(sys.executable)) is None


def test_problem_names_an_interpreter_without_rocketstore(
    bare_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", str(bare_python))
    problem = _interpreter.worker_python_problem(_fake_session(str(bare_python)))
    assert problem is not None
    assert f"run {bare_python} (set by PYSPARK_PYTHON)" in problem
    assert "cannot import rocketstore (ModuleNotFoundError: No module named" in problem
    assert f"PYSPARK_PYTHON={sys.executable}" in problem
    assert "spark.pyspark.python" in problem


def test_problem_names_the_default_python3_from_path(
    bare_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoy = decoy_path(tmp_path / "decoy", bare_python)
    monkeypatch.setenv("PATH", f"{decoy}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    conf = {"spark.pyspark.python": sys.executable}
    problem = _interpreter.worker_python_problem(_fake_session("python3", conf))
    assert problem is not None
    assert f"run {decoy / 'python3'} (python3, PySpark's default" in problem
    # A spark.pyspark.python set on the builder of a plain script is not what PySpark uses.
    assert f"spark.pyspark.python={sys.executable} is set, but only spark-submit" in problem


def test_problem_names_a_missing_interpreter(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-env" / "bin" / "python"
    problem = _interpreter.worker_python_problem(_fake_session(str(missing)))
    assert problem is not None
    assert f"run {missing}" in problem
    assert "not an executable file" in problem


def test_unavailable_source_fails_every_entry_point() -> None:
    source = _interpreter.unavailable_source("rocketstore: set PYSPARK_PYTHON")
    assert source.name() == "rocketstore"
    instance = source({})
    for call in (
        instance.schema,
        lambda: instance.reader(None),  # type: ignore[arg-type]
        lambda: instance.writer(None, False),  # type: ignore[arg-type]
        lambda: instance.streamReader(None),  # type: ignore[arg-type]
    ):
        with pytest.raises(RuntimeError, match="set PYSPARK_PYTHON"):
            call()


# --------------------------------------------------------------------------------------
# End to end, in subprocesses with a real local SparkContext
# --------------------------------------------------------------------------------------


# `make test` runs the same script from the wheel in a bare venv (tests/test_wheel.py); this is
# the development venv's variant.
@pytest.mark.slow
@pytest.mark.spark
def test_unactivated_venv_script_runs_spark_with_its_own_interpreter(
    bare_python: Path, tmp_path: Path
) -> None:
    """``.venv/bin/python job.py`` with ``python3`` on PATH lacking rocketstore: works."""
    _java_or_skip()
    env = unactivated_env(first_on_path=decoy_path(tmp_path / "decoy", bare_python))
    report = run_job(Path(sys.executable), tmp_path / "work", env)
    assert report["worker_python"] == sys.executable
    assert report["pyspark_python_env"] == sys.executable
    assert report["spark_bodies"] == ["spark-0", "spark-1", "spark-2"]
    assert report["lookup"] == ["hello wheel"]


MISMATCH_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import rocketstore.spark  # registers on the running context, whose workers lack it

    sc = spark.sparkContext
    sc.setJobGroup("rocketstore-check", "interpreter check")
    out = {"worker_python": sc.pythonExec}
    root = sys.argv[1]
    df = spark.createDataFrame([("T", b"x")], "topic string, body binary")
    attempts = {
        "write": lambda: df.write.format("rocketstore").mode("append").save(root),
        "read": lambda: spark.read.format("rocketstore").load(root).collect(),
    }
    for what, attempt in attempts.items():
        try:
            attempt()
            out[what] = None
        except Exception as exc:
            out[what] = {"type": type(exc).__name__, "message": str(exc)}
    out["jobs"] = list(sc.statusTracker().getJobIdsForGroup("rocketstore-check"))
    spark.stop()
    print(json.dumps(out))
    """
)


@pytest.mark.spark
def test_running_context_with_another_interpreter_fails_before_any_task(
    bare_python: Path, tmp_path: Path
) -> None:
    _java_or_skip()
    env = unactivated_env()
    env["PYSPARK_PYTHON"] = str(bare_python)
    # The Python data source's own check: with the JVM connector (the default) writes and plain
    # reads need no Python worker at all.
    env["ROCKETSTORE_SPARK_JVM"] = "0"
    script = tmp_path / "job.py"
    script.write_text(MISMATCH_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "stores")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stderr[-8000:]
    assert lines, proc.stderr[-8000:]
    out = json.loads(lines[-1])
    assert out["worker_python"] == str(bare_python)
    for what in ("write", "read"):
        error = out[what]
        assert error is not None, f"{what} worked with workers lacking rocketstore?"
        message = error["message"]
        assert f"Python workers run {bare_python}" in message, message
        assert "cannot import rocketstore" in message
        assert f"PYSPARK_PYTHON={sys.executable}" in message
        assert "spark.pyspark.python" in message
        # The planning worker ran our stand-in, not an unpickling that failed in the worker.
        assert "cloudpickle" not in message, message
        assert "read_command" not in message, message
    assert out["jobs"] == [], "a Spark job was started"
    assert not (tmp_path / "stores").exists()
    assert rocketstore.__version__ in out["write"]["message"]
