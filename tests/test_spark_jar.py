"""``rocketstore spark-jar``: the JVM connector for Scala, Java and SQL jobs, by ``--jars`` (the
jar's path) or by ``--packages`` (``--maven-local``: installed into a local Maven repository
under ``io.github.rocketstore:rocketstore-spark_<scala>:<version>``).

The install itself is checked on a made-up jar (cheap); the slow test runs ``spark-submit
--packages`` offline against the installed connector, from a job that imports no rocketstore
module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.conftest import skip_or_fail

import rocketstore
from rocketstore import cli
from rocketstore.cli import _connector

COORD = f"io.github.rocketstore:rocketstore-spark_2.13:{rocketstore.__version__}"
PACKAGES_JOB = Path(__file__).resolve().parent / "jvm_packages_job.py"


def _fake_jar(path: Path, manifest: str | None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        if manifest is not None:
            zf.writestr("META-INF/MANIFEST.MF", manifest)
        zf.writestr("rocketstore/DefaultSource.class", b"classes")
    return path


MANIFEST = (
    "Manifest-Version: 1.0\nImplementation-Title: rocketstore-spark\n"
    "Spark-Version: 4.3.0\nScala-Binary-Version: 2.13\nRocketstore-Native: linux-x86_64\n\n"
)


def test_maven_local_installs_the_jar_and_a_pom_under_the_scala_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    jar = _fake_jar(tmp_path / "rocketstore-spark.jar", MANIFEST)
    monkeypatch.setattr(_connector, "connector_jar", lambda: jar)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cli.main(["spark-jar", "--maven-local"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == COORD
    directory = tmp_path / "home/.m2/repository/io/github/rocketstore/rocketstore-spark_2.13"
    base = directory / rocketstore.__version__ / f"rocketstore-spark_2.13-{rocketstore.__version__}"
    assert Path(f"{base}.jar").read_bytes() == jar.read_bytes()
    pom = Path(f"{base}.pom").read_text()
    assert "<groupId>io.github.rocketstore</groupId>" in pom
    assert "<artifactId>rocketstore-spark_2.13</artifactId>" in pom
    assert "<dependency>" not in pom
    assert f"use: spark-submit --packages {COORD} " in err
    assert "--repositories" not in err  # ~/.m2/repository is where --packages looks first
    # Again (a new wheel of the same version): replaced in place.
    assert cli.main(["spark-jar", "--maven-local"]) == 0


def test_maven_local_into_another_repository_says_to_pass_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    jar = _fake_jar(tmp_path / "rocketstore-spark.jar", MANIFEST)
    monkeypatch.setattr(_connector, "connector_jar", lambda: jar)
    repo = tmp_path / "repo"
    assert cli.main(["spark-jar", "--maven-local", "--repo", str(repo)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == COORD
    assert f"--repositories {repo.as_uri()}" in err
    assert list(repo.rglob("*.jar")) == [
        repo / "io/github/rocketstore/rocketstore-spark_2.13" / rocketstore.__version__
        / f"rocketstore-spark_2.13-{rocketstore.__version__}.jar"
    ]  # fmt: skip


def test_spark_jar_errors_are_one_line_with_their_own_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["spark-jar", "--repo", str(tmp_path)]) == 2
    assert "--repo is for --maven-local" in capsys.readouterr().err
    # A jar that does not say its Scala version (not built by jvm/build.py).
    jar = _fake_jar(tmp_path / "old.jar", None)
    monkeypatch.setattr(_connector, "connector_jar", lambda: jar)
    assert cli.main(["spark-jar", "--maven-local", "--repo", str(tmp_path / "r")]) == 7
    assert "Scala-Binary-Version" in capsys.readouterr().err
    monkeypatch.setattr(_connector, "connector_jar", lambda: tmp_path / "missing.jar")
    assert cli.main(["spark-jar"]) == 7
    assert "has no JVM connector" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("where", ["m2", "repo"])
def test_spark_submit_packages_resolves_the_connector_offline(tmp_path: Path, where: str) -> None:
    """The route of a Scala/Java/SQL job: ``rocketstore spark-jar --maven-local``, then
    ``spark-submit --packages <coordinate>`` with no network (Ivy finds it in the local Maven
    repository, its ``local-m2-cache``; or, installed with ``--repo DIR``, in the repository
    ``--repositories file://DIR`` adds), and ``format("rocketstore")`` reads with the JVM reader
    from the jar Ivy resolved; the job imports no rocketstore module, and the wheel's classpath
    hook is off (ROCKETSTORE_SPARK_JVM=0)."""
    jar = _connector.connector_jar()
    if not jar.is_file():
        skip_or_fail(f"{jar} does not exist: run `make build` (it builds the JVM connector)")
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        skip_or_fail(f"no {spark_submit} (pip install pyspark)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        skip_or_fail("no Java")
    home = tmp_path / "home"
    root = tmp_path / "store"
    with rocketstore.MessageStore(str(root)) as store:
        for i in range(30):
            store.put("TopicA", f"body-{i}".encode(), tags=f"Tag{i % 3}")
        store.flush()
    # Spark's Ivy reads <user.home>/.m2/repository; both point at the test's home.
    env = {
        **os.environ,
        "HOME": str(home),
        "SPARK_SUBMIT_OPTS": f"-Duser.home={home}",
        "ROCKETSTORE_SPARK_JVM": "0",
        "PYSPARK_PYTHON": sys.executable,
    }
    env.pop("PYTHONPATH", None)  # the job's interpreter finds no checkout
    env.pop("SPARK_DIST_CLASSPATH", None)
    repo = tmp_path / "repo"
    extra = ["--repo", str(repo)] if where == "repo" else []
    install = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", "spark-jar", "--maven-local", *extra],
        env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    coord = install.stdout.strip()
    assert coord == COORD
    proc = subprocess.run(
        [
            str(spark_submit), "--master", "local[1]", "--packages", coord,
            *(["--repositories", repo.as_uri()] if where == "repo" else []),
            "--conf", f"spark.jars.ivy={tmp_path / 'ivy'}",
            "--conf", "spark.ui.enabled=false",
            str(PACKAGES_JOB), str(root),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )  # fmt: skip
    output = f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, output
    module = f"io.github.rocketstore#rocketstore-spark_2.13;{rocketstore.__version__}"
    resolver = "local-m2-cache" if where == "m2" else "repo-1"
    assert f"found {module} in {resolver}" in proc.stderr, output
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["connector_jar"].startswith(str(tmp_path / "ivy" / "jars")), report
    assert "rocketstore JVM reader [body, tags]" in report["read_plan"], report
    assert report["counts"] == {"Tag0": 10, "Tag1": 10, "Tag2": 10}
    assert report["imported"] == []
