"""The release workflow (.github/workflows/release.yml) ships the JVM connector in every wheel.

GitHub Actions cannot run here, so these read the workflow (cheap, no build): each wheel of the
build matrix gets the jar built by jvm/build.py for its own target inside its build image, is
checked with ``--require-jvm``, and is tested with the JVM path on its platform; the recipe's
platform names agree with the checker's and with the Java loader's.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from packaging.requirements import Requirement
from tests.check_wheel import JAR, Policy, native_platform

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
BUILD = ROOT / "jvm" / "build.py"
LOADER = ROOT / "jvm" / "src" / "main" / "java" / "rocketstore" / "spark" / "NativeLibrary.java"


@pytest.fixture(scope="module")
def jobs() -> dict[str, Any]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    result: dict[str, Any] = workflow["jobs"]
    return result


def _matrix(job: dict[str, Any]) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = job["strategy"]["matrix"]["include"]
    return entries


def _step(job: dict[str, Any], uses: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = job["steps"]
    [step] = [s for s in steps if str(s.get("uses", "")).startswith(uses)]
    return step


def _run(job: dict[str, Any]) -> str:
    return "\n".join(str(s.get("run", "")) for s in job["steps"])


def _expand(text: str, entry: dict[str, str]) -> str:
    """``text`` with ``${{ matrix.X }}`` replaced by the entry's values."""
    return re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: entry[m[1]], text)


def _build_module() -> Any:
    spec = importlib.util.spec_from_file_location("jvm_build", BUILD)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_wheel_builds_the_jar_for_its_own_target(jobs: dict[str, Any]) -> None:
    wheels = jobs["wheels"]
    assert "jvm" in wheels["needs"]
    entries = _matrix(wheels)
    assert {(e["libc"], e["arch"]) for e in entries} == {
        (libc, arch) for libc in ("manylinux", "musllinux") for arch in ("x86_64", "aarch64")
    }
    maturin = _step(wheels, "PyO3/maturin-action@")
    download = _step(wheels, "actions/download-artifact@")
    classes_dir = download["with"]["path"]
    for entry in entries:
        with_ = {k: _expand(str(v), entry) for k, v in maturin["with"].items()}
        script = with_["before-script-linux"]
        target = entry["target"]
        assert with_["target"] == target
        assert f"jvm/build.py jni --locked --target {target} --out " in script, script
        lib = re.search(r"jvm/build\.py jni .*--out (\S+)", script)
        assert lib is not None
        assert (
            f"jvm/build.py jar --classes {classes_dir} --lib {lib[1]} --target {target} "
            f"--out python/{JAR}"
        ) in script, script
        # The wheel checker requires the connector on every wheel.
        check = _expand(_run(wheels), entry)
        assert "tests/check_wheel.py --require-jvm " + entry["check"] in check
        # musl cdylibs need a dynamic C library, for maturin's build and the JNI library alike.
        if target.endswith("-musl"):
            assert "-C target-feature=-crt-static" in entry["rustflags"], entry
            assert wheels["env"]["RUSTFLAGS"] == "${{ matrix.rustflags }}"


def test_the_classes_job_feeds_the_wheels(jobs: dict[str, Any]) -> None:
    jvm = jobs["jvm"]
    upload = _step(jvm, "actions/upload-artifact@")
    download = _step(jobs["wheels"], "actions/download-artifact@")
    assert upload["with"]["name"] == download["with"]["name"]
    assert f"jvm/build.py classes --out {upload['with']['path']}" in _run(jvm)
    # Compiled against the PySpark the `spark` extra pins (its Scala version names the artifact).
    with (ROOT / "pyproject.toml").open("rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["spark"]
    [pyspark] = [Requirement(r) for r in extra if Requirement(r).name == "pyspark"]
    installed = re.search(r"pip install '(pyspark[^']*)'", _run(jvm))
    assert installed is not None
    assert Requirement(installed[1]).specifier == pyspark.specifier


def test_every_wheel_is_tested_with_the_jvm_connector_on_its_platform(
    jobs: dict[str, Any],
) -> None:
    test = jobs["test"]
    built = {(e["libc"], e["arch"]) for e in _matrix(jobs["wheels"])}
    assert {(e["libc"], e["arch"]) for e in _matrix(test)} == built
    for libc in ("manylinux", "musllinux"):
        steps = [s for s in test["steps"] if f"matrix.libc == '{libc}'" in str(s.get("if", ""))]
        script = "\n".join(str(s.get("run", "")) for s in steps)
        assert "jvm_order_job.py never" in script, libc
        assert "check_jvm_report.py" in script, libc
    glibc = "\n".join(str(s.get("run", "")) for s in test["steps"])
    assert "spark-jar --maven-local" in glibc
    assert '--packages "$coord"' in glibc


@pytest.mark.parametrize(
    ("target", "platform"),
    [
        ("x86_64-unknown-linux-gnu", "linux-x86_64"),
        ("aarch64-unknown-linux-gnu", "linux-aarch64"),
        ("x86_64-unknown-linux-musl", "linux-x86_64-musl"),
        ("aarch64-unknown-linux-musl", "linux-aarch64-musl"),
    ],
)
def test_the_recipe_the_checker_and_the_loader_name_platforms_alike(
    target: str, platform: str
) -> None:
    assert _build_module().native_platform(target) == platform
    arch = target.split("-", 1)[0]
    family = "musllinux" if target.endswith("musl") else "manylinux"
    assert native_platform(arch, Policy(family, (1, 2))) == platform
    loader = LOADER.read_text()
    assert 'PREFIX = "rocketstore/spark/native/"' in loader
    assert 'platform + "-musl"' in loader
