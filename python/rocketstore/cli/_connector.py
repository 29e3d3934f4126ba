"""``rocketstore spark-jar``: the JVM connector's jar of this installation, and its install into a
local Maven repository under Maven coordinates, for ``spark-submit --packages``.

No public repository serves the connector: each wheel's jar carries the native library of the
wheel's platform, so the coordinate names what this installation has. Spark's ``--packages``
resolver (Ivy) looks in ``~/.m2/repository`` first (its ``local-m2-cache``), so a jar installed
there resolves with no network; any other directory is passed with ``--repositories file://DIR``.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import rocketstore

__all__ = [
    "ARTIFACT",
    "GROUP",
    "Coordinate",
    "connector_jar",
    "coordinate",
    "default_repository",
    "install_maven_local",
    "jar_manifest",
]

#: The Maven group of the connector (no public repository serves it; see the module doc).
GROUP = "io.github.rocketstore"
#: The artifact name before ``_<Scala binary version>``, as Spark connectors are named.
ARTIFACT = "rocketstore-spark"


@dataclass(frozen=True)
class Coordinate:
    """``group:artifact:version``, the form ``--packages`` takes."""

    group: str
    artifact: str
    version: str

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    def directory(self, repository: Path) -> Path:
        """The artifact's directory in a Maven repository laid out as ``~/.m2/repository``."""
        return repository.joinpath(*self.group.split("."), self.artifact, self.version)


def connector_jar() -> Path:
    """The jar the installed package ships (it may not exist: a build without Java)."""
    return Path(rocketstore.__file__).parent / "spark" / "jvm" / "rocketstore-spark.jar"


def jar_manifest(jar: Path) -> dict[str, str]:
    """The main attributes of a jar's ``META-INF/MANIFEST.MF`` (continuation lines joined)."""
    with zipfile.ZipFile(jar) as zf:
        try:
            text = zf.read("META-INF/MANIFEST.MF").decode("utf-8")
        except KeyError:
            return {}
    attributes: dict[str, str] = {}
    last = None
    for line in text.splitlines():
        if not line:
            break  # the main section ends at the first blank line
        if line.startswith(" ") and last is not None:
            attributes[last] += line[1:]
        elif ":" in line:
            last, value = line.split(":", 1)
            attributes[last] = value.strip()
    return attributes


def coordinate(jar: Path) -> Coordinate:
    """The coordinate of a connector jar: ``rocketstore-spark_<Scala binary version of the
    Spark it was compiled against>`` at this package's version. ValueError if the jar does not
    say its Scala version (a jar not built by jvm/build.py)."""
    manifest = jar_manifest(jar)
    scala = manifest.get("Scala-Binary-Version")
    if not scala:
        raise ValueError(f"{jar} does not name its Scala binary version (no Scala-Binary-Version)")
    return Coordinate(GROUP, f"{ARTIFACT}_{scala}", rocketstore.__version__)


def default_repository() -> Path:
    """``~/.m2/repository``: Maven's local repository, which Spark's ``--packages`` reads first."""
    return Path.home() / ".m2" / "repository"


def _pom(coord: Coordinate, manifest: dict[str, str]) -> str:
    spark = manifest.get("Spark-Version", "?")
    platform = manifest.get("Rocketstore-Native", "?")
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 https://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>{coord.group}</groupId>
  <artifactId>{coord.artifact}</artifactId>
  <version>{coord.version}</version>
  <packaging>jar</packaging>
  <name>{ARTIFACT}</name>
  <description>rocketstore's Spark connector, format("rocketstore"), compiled for Spark
    {spark}, with the native library for {platform}; installed from the rocketstore wheel by
    `rocketstore spark-jar --maven-local`.</description>
  <licenses>
    <license>
      <name>Apache-2.0</name>
    </license>
  </licenses>
  <!-- No dependencies: Spark provides every class the connector uses. -->
</project>
"""


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install_maven_local(jar: Path, repository: Path) -> tuple[Coordinate, Path]:
    """Installs ``jar`` and a minimal POM (no dependencies) into the Maven repository
    ``repository`` under :func:`coordinate`, replacing an earlier install of the same version;
    returns the coordinate and the installed jar."""
    coord = coordinate(jar)
    directory = coord.directory(repository)
    directory.mkdir(parents=True, exist_ok=True)
    base = f"{coord.artifact}-{coord.version}"
    installed = directory / f"{base}.jar"
    _write_atomically(installed, jar.read_bytes())
    _write_atomically(directory / f"{base}.pom", _pom(coord, jar_manifest(jar)).encode())
    return coord, installed
