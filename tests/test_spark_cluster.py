"""The ingest + verify job on ``local-cluster[2,1,1024]`` with a packed Python environment.

``local-cluster`` starts a standalone master and two workers inside the driver JVM, and each
worker launches its executor as a separate JVM through ``SPARK_HOME/bin`` scripts (the pip
``pyspark`` package has them). The executors get the Python environment the way a real
cluster does: ``spark.archives=env.tar.gz#environment`` unpacks it into each executor's
working directory and ``PYSPARK_PYTHON=./environment/bin/python`` runs the workers from it.

The environment is packed like ``venv-pack`` would, without needing it: a fresh
``python -m venv --without-pip``, the release wheel from ``make wheel`` installed into it (its
package, native extension and JVM connector jar), and the files of the distributions the
workers import (pyarrow, pandas, numpy and their small dependencies) hard-linked from this
virtualenv, written as a ``.tar.gz``. PySpark is not packed: the driver and the executors
import it from ``SPARK_HOME/python/lib/pyspark.zip``, as ``spark-submit`` gives it.

The driver runs the same environment's interpreter, so the connector jar the session loads and
ships to the executors is the wheel's. As on a client-mode cluster, the driver's own JVM also
runs Python (for the data source's planning) with ``PYSPARK_PYTHON``, so the driver's working
directory holds ``environment`` too (here a symlink to the unpacked environment; on a cluster,
unpack the archive there).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
from tests.test_wheel import _wheel

import rocketstore

# The demo on two executor JVMs (each unpacking the environment) takes minutes on 2 cores.
pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]

#: What the Python workers import besides PySpark (rocketstore and the spark extra).
PACKED_DISTRIBUTIONS = ("pyarrow", "pandas", "numpy", "python-dateutil", "pytz", "tzdata", "six")


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _wheel_files(wheel: Path, site: Path) -> None:
    """Installs a wheel's files into ``site`` the way pip lays them out (its ``purelib`` and
    ``platlib`` data too; its scripts are not needed)."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            parts = Path(info.filename).parts
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            dst = site.joinpath(*parts)
            dst.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, dst.open("wb") as out:
                shutil.copyfileobj(src, out)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                dst.chmod(mode)


def pack_environment(work: Path, wheel: Path | None = None) -> tuple[Path, Path]:
    """Builds ``work/env`` (a relocatable-on-this-host venv) and ``work/env.tar.gz``: rocketstore
    from ``wheel`` (else this checkout's package) and the distributions the workers import."""
    env = work / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    purelib = Path(sysconfig.get_paths()["purelib"])
    rel = purelib.relative_to(sysconfig.get_paths()["data"])
    site = env / rel
    for name in PACKED_DISTRIBUTIONS:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in dist.files or ():
            src = Path(str(dist.locate_file(f)))
            if src.is_file() and "__pycache__" not in src.parts:
                _link_or_copy(src, site / f)
    if wheel is not None:
        _wheel_files(wheel, site)
    else:
        package = Path(rocketstore.__file__).parent  # editable install: the source tree
        for src in package.rglob("*"):
            if src.is_file() and "__pycache__" not in src.parts:
                dst = site / "rocketstore" / src.relative_to(package)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)  # a copy: the source tree's files are rebuilt in place
    archive = work / "env.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(env, arcname=".")
    return env, archive


def test_ingest_and_verify_on_local_cluster_with_packed_env(tmp_path: Path) -> None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("needs Java 17+")
    import pyspark

    pip_home = Path(pyspark.__file__).parent
    assert (pip_home / "bin" / "spark-class").exists(), "pip pyspark lacks bin/ scripts"
    # local-cluster workers keep executor directories (with the unpacked archive) in
    # SPARK_HOME/work, whatever SPARK_WORKER_DIR says; a private SPARK_HOME of symlinks keeps
    # them in tmp_path instead of inside the installed pyspark package.
    spark_home = tmp_path / "spark-home"
    spark_home.mkdir()
    for entry in pip_home.iterdir():
        if entry.name not in ("work", "__pycache__"):
            (spark_home / entry.name).symlink_to(entry)

    # The wheel `make wheel` built, as a user installs it: the driver and the executors run it
    # (its Python package, its native extension, its JVM connector), not this checkout.
    env, archive = pack_environment(tmp_path, wheel=_wheel())
    python = env / "bin" / "python"
    # PySpark as spark-submit gives it to Python processes: from SPARK_HOME/python/lib.
    lib = pip_home / "python" / "lib"
    pythonpath = os.pathsep.join(str(p) for p in sorted(lib.glob("*.zip")))
    # The packed interpreter imports rocketstore (and finds its jar) in the environment.
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import json, rocketstore, pyarrow, pyspark; from rocketstore.cli import main; "
            "print(json.dumps([rocketstore.__file__, pyspark.__file__]))",
        ],
        env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    package, pyspark_file = json.loads(probe.stdout)
    assert package.startswith(str(env)), package
    assert pyspark_file.startswith(str(lib)), pyspark_file
    jar = subprocess.run(
        [str(python), "-m", "rocketstore.cli", "spark-jar"],
        env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    assert jar.startswith(str(env)), jar

    driver_dir = tmp_path / "driver"
    driver_dir.mkdir()
    (driver_dir / "environment").symlink_to(env, target_is_directory=True)
    root = tmp_path / "stores"
    report = tmp_path / "report.json"
    environ = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_DIRS": str(tmp_path / "local"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": "./environment/bin/python",
        "PYSPARK_DRIVER_PYTHON": str(python),
        "PYTHONPATH": pythonpath,
    }
    cmd = [
        str(python), "-m", "rocketstore.cli", "demo",
        "--master", "local-cluster[2,1,1024]",
        "--conf", f"spark.archives={archive}#environment",
        "--conf", "spark.executor.memory=512m",
        "--conf", "spark.driver.memory=1g",
        "--messages", "20000", "--stores", "2", "--store", str(root),
        "--file-size", str(1 << 20), "--report", str(report), "-q",
    ]  # fmt: skip
    try:
        proc = subprocess.run(
            cmd,
            cwd=driver_dir,
            env=environ,
            capture_output=True,
            text=True,
            timeout=840,
            check=False,
        )
        _check_run(proc, report, spark_home)
    finally:  # about 1 GB: the archive and one unpacked copy per executor
        archive.unlink(missing_ok=True)
        shutil.rmtree(spark_home / "work", ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def _check_run(proc: subprocess.CompletedProcess[str], report: Path, spark_home: Path) -> None:
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "ALL CHECKS PASSED" in proc.stdout
    # The JVM reader and writer served the job: no fallback notice.
    assert "Python data source serves" not in proc.stderr, proc.stderr[-4000:]
    assert "ingest: 20,000 messages" in proc.stdout

    data = json.loads(report.read_text())
    assert data["ok"] is True
    assert data["messages"] == 20_000
    runners = [s["verified_by"] for s in data["stores"]]
    assert len(runners) == 2
    for r in runners:
        # Each store was checked by a Python worker of an executor, started from the
        # environment unpacked in that executor's working directory.
        assert r["python"].endswith("environment/bin/python"), r
        assert r["python"].startswith(str(spark_home / "work")), r
        assert r["pid"] != os.getpid()
    unpacked = list((spark_home / "work").glob("app-*/*/environment/bin/python"))
    assert len(unpacked) == 2, unpacked  # one per executor JVM
