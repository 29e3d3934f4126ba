"""Store roots written by an independent Java implementation of the RocketMQ broker write path.

``tests/fixtures/java/BrokerStoreWriter.java`` (JDK standard library only, no code shared with the
Rust engine) writes a complete store root the way a broker does: commitlog, consumequeue, index,
checkpoint, abort/lock and config/*.json, plus ``manifest.json`` describing every record it wrote.
This module compiles that source once per content hash into a cache directory and runs it.

Cache directory: ``$ROCKETSTORE_TEST_CACHE/java/<sha>`` if the variable is set, else
``~/.cache/rocketstore-test/java/<sha>``.

Scenarios: ``basic``, ``broker1g``, ``full``, ``vectors``, ``vectors-delay``, ``vectors-index``
(see the Java file's header and ``BrokerStoreWriter.run`` for what each contains).

``tests/fixtures/java/BrokerStoreReader.java`` (JDK standard library only, sharing no code with the
engine or the writer) loads a store root as the broker's load and recovery would and checks every
consume queue unit and index key against the commit log: :func:`load_broker_store` runs it and
returns its JSON summary (records, problem counts).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

JAVA_SOURCE = Path(__file__).resolve().parent / "fixtures" / "java" / "BrokerStoreWriter.java"
MAIN_CLASS = "BrokerStoreWriter"
READER_SOURCE = JAVA_SOURCE.with_name("BrokerStoreReader.java")
READER_CLASS = "BrokerStoreReader"
SCENARIOS = ("basic", "broker1g", "full", "vectors", "vectors-delay", "vectors-index")

__all__ = [
    "JAVA_SOURCE",
    "SCENARIOS",
    "JavaFixtureError",
    "compiled_classes",
    "java_available",
    "load_broker_store",
    "require_java",
    "write_broker_store",
]


class JavaFixtureError(RuntimeError):
    """The Java writer failed to compile or to run."""


@functools.cache
def java_available() -> bool:
    """True if both ``java`` and ``javac`` (Java 17+) are on PATH and run."""
    java = shutil.which("java")
    javac = shutil.which("javac")
    if java is None or javac is None:
        return False
    try:
        proc = subprocess.run(
            [javac, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    if proc.returncode != 0:
        return False
    version = (proc.stdout + proc.stderr).strip().split()
    try:
        major = int(version[-1].split(".")[0])
    except (IndexError, ValueError):
        return False
    return major >= 17


def require_java() -> None:
    """Skip the calling pytest test when Java is not installed (fail it instead when ``CI=true``).

    Same policy as tests/conftest.py: CI must never pass by skipping.
    """
    if java_available():
        return
    import pytest

    reason = "the Java store-writer fixture needs java and javac 17+ on PATH"
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"{reason} (CI=true: missing dependencies are errors, not skips)")
    pytest.skip(reason)


def _cache_root() -> Path:
    env = os.environ.get("ROCKETSTORE_TEST_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "rocketstore-test"
    return base / "java"


def compiled_classes(source: Path = JAVA_SOURCE, main_class: str = MAIN_CLASS) -> Path:
    """Directory holding the compiled ``source``, compiled at most once per source hash."""
    data = source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:24]
    target = _cache_root() / digest
    if (target / f"{main_class}.class").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=target.parent))
    try:
        proc = subprocess.run(
            [
                "javac",
                "--release",
                "17",
                "-encoding",
                "UTF-8",
                "-Xlint:all",
                "-Werror",
                "-d",
                str(staging),
                str(source),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0:
            raise JavaFixtureError(f"javac failed:\n{proc.stdout}{proc.stderr}")
        try:
            staging.rename(target)  # atomic; a concurrent worker may have won the race
        except OSError:
            if not (target / f"{main_class}.class").is_file():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def load_broker_store(
    root: Path,
    *,
    index_slots: int | None = None,
    index_entries: int | None = None,
    commitlog_file_size: int | None = None,
    cq_file_size: int | None = None,
    timeout: float = 300.0,
) -> dict[str, Any]:
    """Load the store root at ``root`` with the Java loader and return its JSON summary.

    Geometry left as ``None`` is the loader's default (see the Java file's header): file sizes
    from the files, the broker's default index geometry, else entries = 4 x slots.
    """
    classes = compiled_classes(READER_SOURCE, READER_CLASS)
    cmd = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dsun.jnu.encoding=UTF-8"]
    cmd += ["-cp", str(classes), READER_CLASS, "--root", str(root)]
    numeric: list[tuple[str, int | None]] = [
        ("--index-slots", index_slots),
        ("--index-entries", index_entries),
        ("--commitlog-file-size", commitlog_file_size),
        ("--cq-file-size", cq_file_size),
    ]
    for flag, value in numeric:
        if value is not None:
            cmd += [flag, str(value)]
    # File names (topic directories) are UTF-8: a C locale would make the JVM mangle them.
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    if proc.returncode != 0:
        raise JavaFixtureError(
            f"BrokerStoreReader exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    summary: dict[str, Any] = json.loads(proc.stdout)
    return summary


def write_broker_store(
    root: Path,
    scenario: str,
    *,
    seed: int | None = None,
    commitlog_file_size: int | None = None,
    cq_units_per_file: int | None = None,
    index_slots: int | None = None,
    index_entries: int | None = None,
    messages: int | None = None,
    abort: bool = False,
    stale_tail: bool = False,
    foreign_topics: bool = False,
    index_lag: int | None = None,
    timezone: str | None = "UTC",
    timeout: float = 300.0,
) -> dict[str, Any]:
    """Write a broker store root at ``root`` (absent or empty) and return its parsed manifest.

    ``timezone`` sets the JVM's ``user.timezone`` (index file names and UNIQ_KEY month starts are in
    local time); ``None`` keeps the JVM default. Options left as ``None`` use the scenario defaults.
    ``foreign_topics`` (basic) adds topics outside the client's character set (``Tópico-中文-😀``,
    ``café.menu``); ``index_lag=N`` (basic) leaves the last N records out of the index, and with
    ``abort=True`` makes the crashed-writer variant (abort file present, index behind).
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; expected one of {SCENARIOS}")
    classes = compiled_classes()
    # A short-lived batch program: the C1 JIT alone roughly halves its run time.
    cmd: list[str] = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    if timezone is not None:
        cmd.append(f"-Duser.timezone={timezone}")
    cmd += ["-cp", str(classes), MAIN_CLASS, "--root", str(root), "--scenario", scenario]
    numeric: list[tuple[str, int | None]] = [
        ("--seed", seed),
        ("--commitlog-file-size", commitlog_file_size),
        ("--cq-units-per-file", cq_units_per_file),
        ("--index-slots", index_slots),
        ("--index-entries", index_entries),
        ("--messages", messages),
        ("--index-lag", index_lag),
    ]
    for flag, value in numeric:
        if value is not None:
            cmd += [flag, str(value)]
    if abort:
        cmd.append("--abort")
    if stale_tail:
        cmd.append("--stale-tail")
    if foreign_topics:
        cmd.append("--foreign-topics")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise JavaFixtureError(
            f"BrokerStoreWriter exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    manifest: dict[str, Any] = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    return manifest
