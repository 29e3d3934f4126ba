"""Helpers to run a script the way a user's scheduler does: a venv's interpreter, not activated.

* :func:`bare_venv` makes a virtualenv without pip or packages (an interpreter that has
  neither rocketstore nor pyarrow).
* :func:`decoy_path` makes a directory holding ``python3`` -> such an interpreter, to put
  first on ``PATH``: a worker that falls back to PySpark's default ``python3`` then cannot
  import rocketstore, whatever the machine's own ``python3`` has.
* :func:`unactivated_env` is ``os.environ`` without ``VIRTUAL_ENV``, ``PYTHONPATH``,
  ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` and every virtualenv's ``bin`` on ``PATH``.
* :func:`run_job` copies ``tests/standalone_job.py`` into a work directory outside the
  checkout and runs it there with a given interpreter; returns its JSON report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["JOB", "bare_venv", "decoy_path", "run_job", "unactivated_env"]

JOB = Path(__file__).resolve().parent / "standalone_job.py"

_DROPPED = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
    "SPARK_HOME",
    # Where rocketstore's classpath hook puts the JVM connector's jar (the test process's own).
    "SPARK_DIST_CLASSPATH",
)


def bare_venv(path: Path) -> Path:
    """A new virtualenv at ``path`` with nothing installed; returns its ``bin/python``."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120
    )
    return path / "bin" / "python"


def decoy_path(directory: Path, python: Path) -> Path:
    """``directory`` with ``python3`` pointing at ``python``, to put first on ``PATH``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "python3").symlink_to(python)
    return directory


def _in_a_venv(entry: str) -> bool:
    return bool(entry) and (Path(entry).parent / "pyvenv.cfg").is_file()


def unactivated_env(*, first_on_path: Path | None = None) -> dict[str, str]:
    """The environment of a script started by path: no venv on ``PATH``, no PySpark settings."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    entries = [e for e in env.get("PATH", os.defpath).split(os.pathsep) if not _in_a_venv(e)]
    if first_on_path is not None:
        entries.insert(0, str(first_on_path))
    env["PATH"] = os.pathsep.join(entries)
    return env


def run_job(python: Path, work: Path, env: dict[str, str], timeout: float = 600) -> dict[str, Any]:
    """Runs ``standalone_job.py`` from ``work`` with ``python``; returns its JSON report."""
    work.mkdir(parents=True, exist_ok=True)
    script = work / JOB.name
    shutil.copyfile(JOB, script)
    proc = subprocess.run(
        [str(python), str(script), str(work)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    output = f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-8000:]}"
    assert proc.returncode == 0, f"{python} {script} exited with {proc.returncode}\n{output}"
    assert lines, f"{python} {script} printed nothing\n{output}"
    report: dict[str, Any] = json.loads(lines[-1])
    return report
