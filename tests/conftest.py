"""Shared pytest fixtures for rocketstore.

Fixtures:
    store_dir   a fresh, not yet existing directory for one store (under tmp_path)
    tree_digest function: directory -> {relative path: FileDigest}; compare two results to
                prove that an operation changed nothing on disk (content, size, file set)
    spark       session-scoped local SparkSession (local[2], UI off, UTC)

Markers (registered in pyproject.toml): ``spark``, ``crash``, ``slow``. A test that uses the
``spark`` fixture is marked ``spark`` automatically.

Missing optional dependencies (Java, pyspark) skip the Spark tests on a developer machine,
but fail them in CI (``CI=true``): CI must never pass by skipping. With ``CI=true``,
Hypothesis loads its built-in ``ci`` profile (derandomized, no deadline, no example database).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

IN_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test locally; fail it in CI, where every dependency must be present."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: missing dependencies are errors, not skips)")
    pytest.skip(reason)


# --------------------------------------------------------------------------------------
# Store directories and on-disk digests
# --------------------------------------------------------------------------------------


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """Path for a new store; the directory itself does not exist yet (the store creates it)."""
    return tmp_path / "store"


@dataclass(frozen=True)
class FileDigest:
    """What identifies one directory entry's content; mtime and atime are deliberately ignored."""

    kind: str  # "file", "dir" or "symlink"
    size: int
    sha256: str  # file content, symlink target, or "" for a directory


def digest_tree(root: Path) -> dict[str, FileDigest]:
    """Digest every entry under ``root`` (recursively), keyed by POSIX path relative to root.

    Compare two digests with ``==`` to assert that a read-only operation created, deleted,
    resized or rewrote nothing. Directories are included, so new empty directories show up
    too. Symlinks are recorded by their target and not followed.
    """
    if not root.is_dir():
        raise FileNotFoundError(f"not a directory: {root}")
    result: dict[str, FileDigest] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                target = os.readlink(path)
                sha = hashlib.sha256(target.encode()).hexdigest()
                result[rel] = FileDigest("symlink", len(target), sha)
            elif path.is_dir():
                result[rel] = FileDigest("dir", 0, "")
            else:
                h = hashlib.sha256()
                size = 0
                with path.open("rb") as f:
                    while chunk := f.read(1 << 20):
                        h.update(chunk)
                        size += len(chunk)
                result[rel] = FileDigest("file", size, h.hexdigest())
    return result


@pytest.fixture
def tree_digest() -> Callable[[Path], dict[str, FileDigest]]:
    """The :func:`digest_tree` helper as a fixture (test modules cannot import conftest).

    Example::

        before = tree_digest(store_dir)
        with MessageStore(store_dir, read_only=True) as store:
            store.scan(...)
        assert tree_digest(store_dir) == before
    """
    return digest_tree


# --------------------------------------------------------------------------------------
# Spark
# --------------------------------------------------------------------------------------


def _java_major_version() -> int | None:
    """Major version of the ``java`` Spark would use (JAVA_HOME first), or None if absent."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        return None
    proc = subprocess.run(
        [java, "-XshowSettings:properties", "-version"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    for line in proc.stderr.splitlines():
        key, _, value = line.strip().partition(" = ")
        if key == "java.specification.version":
            major = value.removeprefix("1.").split(".")[0]
            return int(major) if major.isdigit() else None
    return None


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A local Spark session shared by the whole test run.

    local[2] (the CI machine has 2 cores), UI off, 2 shuffle partitions, bound to
    127.0.0.1, session time zone UTC, and Python workers running this interpreter.
    """
    major = _java_major_version()
    if major is None:
        skip_or_fail("Spark tests need Java 17+; no java found (set JAVA_HOME or install it)")
    elif major < 17:
        skip_or_fail(f"Spark tests need Java 17+; found Java {major}")
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        skip_or_fail(f"Spark tests need pyspark (pip install 'rocketstore[spark]'): {exc}")

    # Workers are forked from a daemon that runs this interpreter, so they import the same
    # rocketstore build; set before the JVM starts.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    work = tmp_path_factory.mktemp("spark")
    from rocketstore.spark._jvm import jvm_reader_conf

    builder = SparkSession.builder
    # The JVM reader when it was built (`make build`): every Spark test then runs with
    # format("rocketstore") resolved to its provider, so writes and streams are checked
    # through it too; tests/test_spark_jvm_reader.py compares it with the Python reader.
    for key, value in jvm_reader_conf().items():
        builder = builder.config(key, value)
    session = (
        builder.master("local[2]")
        .appName("rocketstore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .config("spark.local.dir", str(work / "local"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the ``spark`` fixture with the ``spark`` marker."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
