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
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.tags import Tag
from tests.check_wheel import (
    MANYLINUX_2_28,
    Policy,
    check_elf,
    check_tags,
    check_versioned_symbols,
    check_wheel,
)
from tests.conftest import skip_or_fail
from tests.isolated import bare_venv, decoy_path, run_job, unactivated_env

import rocketstore

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"

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


def test_the_built_wheel_passes_the_checker() -> None:
    wheel = _wheel()
    problems, version = check_wheel(wheel, MANYLINUX_2_28)
    assert problems == []
    assert version == rocketstore.__version__


# --------------------------------------------------------------------------------------
# The wheel in a new virtualenv
# --------------------------------------------------------------------------------------


@pytest.mark.spark
def test_wheel_runs_put_arrow_lookup_and_spark_in_a_bare_unactivated_venv(tmp_path: Path) -> None:
    from tests.conftest import _java_major_version

    wheel = _wheel()
    major = _java_major_version()
    if major is None or major < 17:
        skip_or_fail(f"needs Java 17+ (found {major})")

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

    decoy = decoy_path(tmp_path / "decoy", bare_venv(tmp_path / "bare"))
    report = run_job(python, tmp_path / "work", unactivated_env(first_on_path=decoy))

    site = Path(report["rocketstore_file"]).resolve()
    assert site.is_relative_to((tmp_path / "venv").resolve()), site
    assert not [p for p in report["sys_path"] if p and Path(p).resolve().is_relative_to(ROOT)]
    assert report["executable"] == str(python)
    assert report["version"] == rocketstore.__version__
    assert report["arrow_rows"] == 1
    assert report["arrow_bodies"] == ["hello wheel"]
    assert report["lookup"] == ["hello wheel"]
    assert report["worker_python"] == str(python)
    assert report["spark_bodies"] == ["spark-0", "spark-1", "spark-2"]
