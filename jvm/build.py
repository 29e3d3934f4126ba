"""Builds the JVM Spark connector's jar: the one recipe of `make jvm`/`make wheel` and of the
release workflow (.github/workflows/release.yml).

Three steps, each a subcommand, so that the platform-independent part runs once and the native
part in each wheel's own build environment:

``classes --out DIR``
    compiles ``jvm/src/main/java`` with ``javac --release 17`` against PySpark's jars (the
    ``pyspark`` package of this interpreter, or ``--spark-jars DIR``) into ``DIR``, with the
    jar's manifest (``META-INF/MANIFEST.MF``: the rocketstore version, the Spark version and
    its Scala binary version, which ``rocketstore spark-jar --maven-local`` names the artifact
    after). Needs a JDK 17+ (``JAVA_HOME`` or ``javac`` on ``PATH``).
``jni --target TRIPLE --out FILE [--locked]``
    builds ``librocketstore_jni.so`` (crates/rocketstore-jni) for the Rust target ``TRIPLE``
    with ``$CARGO`` (default ``cargo``) in the environment it is given (the Makefile's zig
    linker; the manylinux/musllinux image of a release wheel): ``cargo rustc --release --lib
    --crate-type cdylib``, as maturin builds the extension, so both share their dependencies'
    artifacts (tests/check_shared_builds.py). For a musl target, ``-C
    target-feature=-crt-static`` is added to ``RUSTFLAGS`` (a cdylib needs a dynamic libc).
``jar --classes DIR --lib FILE --target TRIPLE --out JAR``
    packs the classes and the library, as the resource
    ``rocketstore/spark/native/<platform>/librocketstore_jni.so``, ``<platform>`` being
    ``linux-<arch>`` for glibc and ``linux-<arch>-musl`` for musl (:func:`native_platform`;
    ``rocketstore.spark.NativeLibrary`` picks the same name for the JVM it runs in).

Only the standard library, and Python 3.8 for ``jni`` and ``jar``: they run inside the wheel
build images (a musllinux image's ``python3`` may be older than the project's 3.11).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "jvm" / "src" / "main"
LIBRARY = "librocketstore_jni.so"
#: Where the jar keeps its native library, below it one directory per platform.
NATIVE_PREFIX = "rocketstore/spark/native"
ARTIFACT = "rocketstore-spark"

_ARCHES = {"x86_64": "x86_64", "aarch64": "aarch64"}


def native_platform(target: str) -> str:
    """The jar's resource directory name for a Rust target triple: ``linux-x86_64`` for
    ``x86_64-unknown-linux-gnu``, ``linux-aarch64-musl`` for ``aarch64-unknown-linux-musl``."""
    m = re.match(r"^([a-z0-9_]+)-[a-z]+-linux-(gnu|musl)$", target)
    if m is None or m.group(1) not in _ARCHES:
        raise SystemExit(
            f"build.py: unsupported target {target!r}: want <x86_64|aarch64>-*-linux-<gnu|musl>"
        )
    suffix = "-musl" if m.group(2) == "musl" else ""
    return f"linux-{_ARCHES[m.group(1)]}{suffix}"


def _tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    path = str(Path(home) / "bin" / name) if home else shutil.which(name)
    if not path or not Path(path).is_file():
        raise SystemExit(f"build.py: no {name} (install a JDK 17+ or set JAVA_HOME)")
    return path


def _workspace_version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[1]
    m = re.search(r'^version\s*=\s*"([^"]+)"', section, re.MULTILINE)
    if m is None:
        raise SystemExit("build.py: no [workspace.package] version in Cargo.toml")
    return m.group(1)


def _spark_jars() -> Path:
    import pyspark  # the interpreter that runs this script has PySpark

    return Path(pyspark.__file__).parent / "jars"


def spark_versions(jars: Path) -> tuple[str, str]:
    """``(spark version, Scala binary version)`` of a Spark distribution's jars directory,
    read from the name of its ``spark-core_<scala>-<version>.jar``."""
    for jar in sorted(jars.glob("spark-core_*.jar")):
        m = re.match(r"^spark-core_(\d+\.\d+)-(.+)\.jar$", jar.name)
        if m:
            return m.group(2), m.group(1)
    raise SystemExit(f"build.py: no spark-core_<scala>-<version>.jar in {jars}")


def classes(out: Path, spark_jars: Path | None) -> None:
    jars = spark_jars or _spark_jars()
    spark, scala = spark_versions(jars)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    sources = sorted(str(p) for p in (SOURCES / "java").rglob("*.java"))
    subprocess.run(
        [
            _tool("javac"), "--release", "17",
            "-Xlint:all", "-Xlint:-path", "-Xlint:-classfile", "-Xlint:-serial", "-Werror",
            "-d", str(out), "-cp", str(jars / "*"), *sources,
        ],
        check=True,
    )  # fmt: skip
    resources = SOURCES / "resources"
    if resources.is_dir():
        shutil.copytree(resources, out, dirs_exist_ok=True)
    manifest = out / "META-INF" / "MANIFEST.MF"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(
        "Manifest-Version: 1.0\n"
        f"Implementation-Title: {ARTIFACT}\n"
        f"Implementation-Version: {_workspace_version()}\n"
        f"Spark-Version: {spark}\n"
        f"Scala-Binary-Version: {scala}\n"
        "\n"
    )
    print(f"build.py: classes for Spark {spark} (Scala {scala}) in {out}")


def jni(target: str, out: Path, locked: bool) -> None:
    native_platform(target)  # refuses a target the jar has no name for
    env = dict(os.environ)
    if target.endswith("-musl") and "crt-static" not in env.get("RUSTFLAGS", ""):
        env["RUSTFLAGS"] = (env.get("RUSTFLAGS", "") + " -C target-feature=-crt-static").strip()
    cargo = env.get("CARGO", "cargo")
    cmd = [cargo, "rustc", *(["--locked"] if locked else []), "--release", "--target", target]
    cmd += ["-p", "rocketstore-jni", "--lib", "--crate-type", "cdylib"]
    # Debug info off (tens of MB -> a few MB); the symbol table stays for profilers.
    cmd += ["--", "-C", "strip=debuginfo"]
    print("build.py: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)
    target_dir = Path(env.get("CARGO_TARGET_DIR") or ROOT / "target")
    if not target_dir.is_absolute():
        target_dir = ROOT / target_dir
    built = target_dir / target / "release" / LIBRARY
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(built, out)
    print(f"build.py: {out} ({out.stat().st_size:,} bytes)")


def jar(classes_dir: Path, lib: Path, target: str, out: Path) -> None:
    platform = native_platform(target)
    manifest = classes_dir / "META-INF" / "MANIFEST.MF"
    if not manifest.is_file():
        raise SystemExit(f"build.py: {classes_dir} has no META-INF/MANIFEST.MF (run `classes`)")
    head = manifest.read_text().rstrip("\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.name, dir=out.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            # The manifest first, as `jar` writes it (java.util.jar.JarInputStream expects it).
            zf.writestr("META-INF/", b"")
            zf.writestr("META-INF/MANIFEST.MF", f"{head}\nRocketstore-Native: {platform}\n\n")
            for path in sorted(classes_dir.rglob("*")):
                name = path.relative_to(classes_dir).as_posix()
                if name in ("META-INF", "META-INF/MANIFEST.MF"):
                    continue
                if path.is_dir():
                    zf.writestr(name + "/", b"")
                else:
                    zf.write(path, name)
            parts = f"{NATIVE_PREFIX}/{platform}".split("/")
            written = set(zf.namelist())
            for i in range(1, len(parts) + 1):
                directory = "/".join(parts[:i]) + "/"
                if directory not in written:
                    zf.writestr(directory, b"")
            zf.write(lib, f"{NATIVE_PREFIX}/{platform}/{LIBRARY}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"build.py: {out} with {NATIVE_PREFIX}/{platform}/{LIBRARY}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    sub = parser.add_subparsers(dest="step", required=True)
    c = sub.add_parser("classes", help="compile jvm/ against PySpark's jars")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--spark-jars", type=Path, help="Spark's jars/ (default: PySpark's)")
    j = sub.add_parser("jni", help="build librocketstore_jni.so for a Rust target")
    j.add_argument("--target", required=True)
    j.add_argument("--out", type=Path, required=True)
    j.add_argument("--locked", action="store_true", help="cargo --locked")
    p = sub.add_parser("jar", help="pack the classes and the library into the jar")
    p.add_argument("--classes", type=Path, required=True)
    p.add_argument("--lib", type=Path, required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.step == "classes":
        classes(args.out, args.spark_jars)
    elif args.step == "jni":
        jni(args.target, args.out, args.locked)
    else:
        jar(args.classes, args.lib, args.target, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
