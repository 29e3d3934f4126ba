"""The release wheel from ``make wheel``, installed where a user would put it.

``make test`` builds ``dist/`` first (``make wheel``: a manylinux_2_28 abi3 wheel linked by
zig, and an sdist, checked by ``tests/check_wheel.py``). Here the wheel, with its ``spark``
extra, goes into a new virtualenv that has nothing else (no Rust, no pip, no checkout on
``sys.path``); dependencies come from PyPI or pip's cache, pinned to the versions of the
development environment. A script in a directory outside the checkout then runs with that
venv's interpreter by path, not activated (its ``bin`` not on ``PATH``, no ``PYSPARK_PYTHON``,
and a ``python3`` without rocketstore first on ``PATH``): a put, an Arrow read, a key lookup,
and a Spark write + read round trip.

The checker's own rules are tested on made-up tags and symbol versions.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.tags import Tag
from tests.check_wheel import (
    MANYLINUX_2_28,
    Policy,
    check_elf,
    check_jar,
    check_tags,
    check_versioned_symbols,
    check_wheel,
)
from tests.conftest import skip_or_fail
from tests.isolated import bare_venv, decoy_path, run_job, unactivated_env

import rocketstore

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
ORDER_JOB = Path(__file__).resolve().parent / "jvm_order_job.py"

#: What the spark extra pulls in: pinned to this environment's versions, which pip has cached.
PINNED = ("pyspark", "py4j", "pyarrow", "pandas", "numpy")


def _wheel() -> Path:
    name = f"rocketstore-{rocketstore.__version__}-cp311-abi3-manylinux_2_28_{platform.machine()}"
    wheel = DIST / f"{name}.whl"
    if not wheel.is_file():
        skip_or_fail(f"{wheel} does not exist: run `make wheel` (make test does)")
    return wheel


# --------------------------------------------------------------------------------------
# The checker's rules (tests/check_wheel.py, run by `make wheel`)
# --------------------------------------------------------------------------------------


def test_tags_must_be_cp311_abi3_manylinux_2_28_or_older() -> None:
    assert check_tags({Tag("cp311", "abi3", "manylinux_2_28_x86_64")}) == []
    assert check_tags({Tag("cp311", "abi3", "manylinux_2_17_aarch64")}) == []
    assert check_tags({Tag("cp311", "abi3", "manylinux_2_34_x86_64")})
    assert check_tags({Tag("cp311", "cp311", "manylinux_2_28_x86_64")})
    assert check_tags({Tag("cp311", "abi3", "linux_x86_64")})
    assert check_tags({Tag("cp311", "abi3", "musllinux_1_2_x86_64")})
    assert check_tags(set())
    musl = Policy("musllinux", (1, 2))
    assert check_tags({Tag("cp311", "abi3", "musllinux_1_2_aarch64")}, musl) == []
    assert check_tags({Tag("cp311", "abi3", "manylinux_2_28_x86_64")}, musl)


def test_glibc_symbol_versions_above_the_limit_fail() -> None:
    ok = {"libc.so.6": {"GLIBC_2.2.5", "GLIBC_2.28"}, "libgcc_s.so.1": {"GCC_4.2.0"}}
    assert check_versioned_symbols(ok, MANYLINUX_2_28, "x") == []
    bad = {"libc.so.6": {"GLIBC_2.17", "GLIBC_2.34"}}
    [problem] = check_versioned_symbols(bad, MANYLINUX_2_28, "x")
    assert "GLIBC_2.34" in problem
    # A musllinux wheel must not need glibc at all.
    assert check_versioned_symbols(ok, Policy("musllinux", (1, 2)), "x")


def test_elf_reader_sees_the_native_modules_libraries_and_versions() -> None:
    # The development build (this machine's glibc): every glibc symbol version is above 2.0,
    # so a 2.0 limit must flag it; its libraries are all manylinux ones.
    so = Path(rocketstore._native.__file__ or "")
    problems = check_elf(so.read_bytes(), so.name, Policy("manylinux", (2, 0)))
    assert any("libc.so.6 symbol version GLIBC_2." in p for p in problems), problems
    assert not any("does not guarantee" in p for p in problems), problems
    musl = check_elf(so.read_bytes(), so.name, Policy("musllinux", (1, 2)))
    assert any("needs libc.so.6, which musllinux_1_2 does not guarantee" in p for p in musl)


def _jar_with(tmp_path: Path, platform_dir: str) -> bytes:
    """A connector jar holding the extension module (any ELF) as the library of ``platform_dir``."""
    path = tmp_path / f"{platform_dir}.jar"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("rocketstore/DefaultSource.class", b"")
        lib = f"rocketstore/spark/native/{platform_dir}/librocketstore_jni.so"
        zf.write(rocketstore._native.__file__ or "", lib)
    return path.read_bytes()


def test_the_jar_must_carry_the_library_of_the_wheels_own_libc(tmp_path: Path) -> None:
    """A musllinux wheel's jar carries linux-<arch>-musl/ (which only a musl JVM loads) and no
    glibc library; a manylinux wheel's carries linux-<arch>/."""
    musl = Policy("musllinux", (1, 2))
    tags = {Tag("cp311", "abi3", "musllinux_1_2_x86_64")}
    # The glibc directory in a musllinux wheel: its own library is missing, the other is refused.
    problems = check_jar(_jar_with(tmp_path, "linux-x86_64"), tags, musl)
    assert any("no rocketstore/spark/native/linux-x86_64-musl/" in p for p in problems), problems
    assert any("which is not for this wheel's platform" in p for p in problems), problems
    # The musl directory: found and checked as an ELF for musl (this glibc build then fails it).
    problems = check_jar(_jar_with(tmp_path, "linux-x86_64-musl"), tags, musl)
    assert not any("no rocketstore/spark/native" in p for p in problems), problems
    assert any("needs libc.so.6" in p for p in problems), problems
    glibc = {Tag("cp311", "abi3", "manylinux_2_28_x86_64")}
    problems = check_jar(_jar_with(tmp_path, "linux-x86_64-musl"), glibc, MANYLINUX_2_28)
    assert any("no rocketstore/spark/native/linux-x86_64/" in p for p in problems), problems


def test_the_built_wheel_passes_the_checker() -> None:
    wheel = _wheel()
    problems, version = check_wheel(wheel, MANYLINUX_2_28)
    assert problems == []
    assert version == rocketstore.__version__
    problems, _ = check_wheel(wheel, MANYLINUX_2_28, require_jvm=True)
    assert problems == []


# --------------------------------------------------------------------------------------
# The wheel in a new virtualenv
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with the wheel and its ``spark`` extra (nothing else); its python."""
    from tests.conftest import _java_major_version

    wheel = _wheel()
    major = _java_major_version()
    if major is None or major < 17:
        skip_or_fail(f"needs Java 17+ (found {major})")
    tmp_path = tmp_path_factory.mktemp("wheel-venv")
    python = bare_venv(tmp_path / "venv")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(
        "".join(f"{name}=={importlib.metadata.version(name)}\n" for name in PINNED)
    )
    # This environment's pip installs into the new venv (which gets no pip of its own).
    install = subprocess.run(
        [
            sys.executable, "-m", "pip", "--python", str(python), "install",
            "--no-compile", "--disable-pip-version-check", "--no-input",
            "-c", str(constraints), f"{wheel}[spark]",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout[-4000:] + install.stderr[-4000:]
    assert "Building wheel for rocketstore" not in install.stdout  # installed, not compiled
    return python


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_wheel_runs_put_arrow_lookup_and_spark_in_a_bare_unactivated_venv(
    wheel_venv: Path, tmp_path: Path
) -> None:
    python = wheel_venv
    decoy = decoy_path(tmp_path / "decoy", bare_venv(tmp_path / "bare"))
    report = run_job(python, tmp_path / "work", unactivated_env(first_on_path=decoy))

    site = Path(report["rocketstore_file"]).resolve()
    assert site.is_relative_to(python.parent.parent.resolve()), site
    assert not [p for p in report["sys_path"] if p and Path(p).resolve().is_relative_to(ROOT)]
    assert report["executable"] == str(python)
    assert report["version"] == rocketstore.__version__
    assert report["arrow_rows"] == 1
    assert report["arrow_bodies"] == ["hello wheel"]
    assert report["lookup"] == ["hello wheel"]
    assert report["worker_python"] == str(python)
    assert report["spark_bodies"] == ["spark-0", "spark-1", "spark-2"]


def _run_order_job(
    python: Path, order: str, work: Path, *, fallback: bool = True, **env: str
) -> tuple[dict[str, Any], str]:
    """Runs tests/jvm_order_job.py with the wheel's interpreter (``fallback``: also the jobs
    with ``spark.rocketstore.jvm=false``); its report and stderr."""
    work.mkdir(parents=True)
    script = work / ORDER_JOB.name
    shutil.copyfile(ORDER_JOB, script)
    environ = {**unactivated_env(), "PYSPARK_PYTHON": str(python), **env}
    proc = subprocess.run(
        [str(python), str(script), order, str(work), *([] if fallback else ["--no-fallback"])],
        cwd=work,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-8000:]}"
    assert proc.returncode == 0, output
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report, proc.stderr


# The first test that uses wheel_venv pays for the install too (pip, then a Spark JVM per job).
@pytest.mark.spark
@pytest.mark.timeout(900)
@pytest.mark.parametrize("order", ["before", "after", "never"])
def test_a_plain_session_takes_the_jvm_connector_in_any_import_order(
    wheel_venv: Path, tmp_path: Path, order: str
) -> None:
    """``import rocketstore.spark`` before the session, after it, or never: a plain
    ``SparkSession.builder.master("local[2]").getOrCreate()`` reads with the JVM scan and writes
    with the JVM writer; with ``spark.rocketstore.jvm=false`` the Python data source serves
    both and says why once, in one line (checked with ``after``, where the module registers the
    source on a running session, and ``never``, where Spark discovers it; ``before`` registers it
    the way ``after`` does)."""
    fallback = order != "before"
    report, stderr = _run_order_job(wheel_venv, order, tmp_path / "work", fallback=fallback)
    assert report["imported"] == (order != "never")
    # The wheel's jar, in the new virtualenv.
    assert Path(report["connector_jar"]).is_relative_to(wheel_venv.parent.parent), report
    want = {"Tag0": 667, "Tag1": 667, "Tag2": 666}
    assert report["default"]["counts"] == want
    assert "rocketstore JVM reader [body, tags]" in report["default"]["read_plan"]
    if not fallback:
        [jvm_write] = report["write_plans"]
        assert "rocketstore JVM writer" in jvm_write, jvm_write
        assert "Python data source serves" not in stderr, stderr[-4000:]
        return
    assert report["off"]["counts"] == want
    assert "(Python)" in report["off"]["read_plan"], report["off"]["read_plan"]
    assert "JVM reader" not in report["off"]["read_plan"]
    jvm_write, python_write = report["write_plans"]
    assert "rocketstore JVM writer" in jvm_write, jvm_write
    assert "rocketstore JVM writer" not in python_write, python_write
    notices = [line for line in stderr.splitlines() if "Python data source serves" in line]
    assert len(notices) == 2, stderr[-4000:]  # reads and writes, each once
    for what, notice in zip(("writes", "reads"), notices, strict=True):
        assert f"the Python data source serves {what} (not the JVM connector): " in notice
        assert notice.endswith("spark.rocketstore.jvm=false"), notice


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_the_environment_switch_keeps_the_jar_out(wheel_venv: Path, tmp_path: Path) -> None:
    """``ROCKETSTORE_SPARK_JVM=0``: no JVM connector in the session; ``import rocketstore.spark``
    says so once, in one line, and the Python data source serves the jobs."""
    report, stderr = _run_order_job(
        wheel_venv, "after", tmp_path / "work", fallback=False, ROCKETSTORE_SPARK_JVM="0"
    )
    assert report["connector_jar"] is None
    assert "(Python)" in report["default"]["read_plan"]
    assert not [p for p in report["write_plans"] if "rocketstore JVM writer" in p]
    notices = [line for line in stderr.splitlines() if "Python data source serves" in line]
    assert notices == [
        "rocketstore: the Python data source serves format('rocketstore') jobs: "
        "the JVM connector is switched off (ROCKETSTORE_SPARK_JVM=0)"
    ], stderr[-4000:]


@pytest.mark.timeout(900)
def test_spark_jar_command_prints_the_jar_of_the_wheel(wheel_venv: Path, tmp_path: Path) -> None:
    """``rocketstore spark-jar``: the jar Scala/Java/SQL jobs pass to ``--jars``, with the
    native library for this platform inside."""
    proc = subprocess.run(
        [str(wheel_venv.parent / "rocketstore"), "spark-jar"],
        cwd=tmp_path,
        env=unactivated_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    jar = Path(proc.stdout.strip())
    assert jar.is_relative_to(wheel_venv.parent.parent), jar
    with zipfile.ZipFile(jar) as zf:
        names = set(zf.namelist())
    assert "rocketstore/DefaultSource.class" in names
    assert f"rocketstore/spark/native/linux-{platform.machine()}/librocketstore_jni.so" in names
