"""Checks rocketstore wheels and sdists; prints what it found, exit status 1 on a problem.

Usage::

    python tests/check_wheel.py --max-glibc 2.28 --require-sdist --require-jvm dist  # make wheel
    python tests/check_wheel.py --require-jvm --musllinux 1.2 dist                   # release

Arguments are wheel/sdist files or directories holding them. Each wheel (manylinux by default,
``--musllinux X.Y`` for musl ones):

* file name and ``WHEEL`` metadata carry the same tags, each
  ``cp311-abi3-manylinux_X_Y_<arch>`` with glibc ``X.Y`` at most ``--max-glibc`` (or
  ``musllinux_X_Y`` at most ``--musllinux``), and ``Root-Is-Purelib: false``;
* one extension module, ``rocketstore/_native.abi3.so``, whose ELF needs only libraries the
  platform guarantees (glibc's libc, libm, libdl, libpthread, librt, libgcc_s and loader; musl's
  ``libc.so``; or libraries vendored in ``rocketstore.libs/``; never libpython), with no
  ``GLIBC_`` symbol version above ``--max-glibc`` (none at all for musl), read with pyelftools;
* the JVM connector, ``rocketstore/spark/jvm/rocketstore-spark.jar`` (required with
  ``--require-jvm``, as ``make wheel`` passes): ``rocketstore/DefaultSource.class``, no
  ``DataSourceRegister`` service, and for the wheel's platform the JNI library (and no other)
  ``rocketstore/spark/native/linux-<arch>[-musl]/librocketstore_jni.so``, whose ELF is checked
  as the extension's is (a musl one may also need ``libgcc_s.so.1``, which a musl JVM has
  loaded); with it, the classpath hook ``_rocketstore_spark_jvm.py`` and its ``.pth``;
* ``auditwheel show`` (printed, then read as JSON): platform tag within the limit, no external
  library left to vendor, no ``GLIBC_`` version above the limit.

Each sdist: the wheel's version, everything a build from source needs (``pyproject.toml``,
``Cargo.toml``, ``Cargo.lock``, the three crates, the Python package) and no compiled module.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from packaging.tags import Tag, parse_tag
from packaging.utils import parse_sdist_filename, parse_wheel_filename

__all__ = [
    "MANYLINUX_2_28",
    "MANYLINUX_LIBRARIES",
    "MUSLLINUX_LIBRARIES",
    "Policy",
    "check_elf",
    "check_jar",
    "check_paths",
    "check_sdist",
    "check_tags",
    "check_versioned_symbols",
    "check_wheel",
    "main",
    "native_platform",
]

#: Shared libraries a manylinux wheel may need from the system (PEP 600's glibc set).
MANYLINUX_LIBRARIES = frozenset(
    {
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "libgcc_s.so.1",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
    }
)
#: ... and a musllinux wheel (PEP 656: musl's libc; auditwheel vendors anything else).
MUSLLINUX_LIBRARIES = frozenset({"libc.so"})

#: Files a build from the sdist cannot do without (paths below ``rocketstore-<version>/``).
SDIST_REQUIRED = (
    "PKG-INFO",
    "pyproject.toml",
    "Cargo.toml",
    "Cargo.lock",
    "README.md",
    "crates/rocketstore-format/Cargo.toml",
    "crates/rocketstore/Cargo.toml",
    "crates/rocketstore-arrow/Cargo.toml",
    "crates/rocketstore-py/Cargo.toml",
    "crates/rocketstore-py/src/lib.rs",
    "python/rocketstore/__init__.py",
    "python/rocketstore/_native.pyi",
    "python/rocketstore/py.typed",
    "python/rocketstore/spark/__init__.py",
    "python/pyspark_rocketstore/__init__.py",
    "python/_rocketstore_spark_jvm/__init__.py",
    "python/rocketstore.data/purelib/rocketstore_spark_jvm.pth",
)

#: The JVM connector's jar in the wheel, and what puts it on Spark's classpath.
JAR = "rocketstore/spark/jvm/rocketstore-spark.jar"
PTH = "rocketstore_spark_jvm.pth"
CLASSPATH_MODULE = "_rocketstore_spark_jvm/__init__.py"
REGISTER_SERVICE = "org.apache.spark.sql.sources.DataSourceRegister"
#: The JNI library's directories inside the jar: ``<NATIVE_PREFIX>/<platform>/<LIBRARY>``.
NATIVE_PREFIX = "rocketstore/spark/native"
LIBRARY = "librocketstore_jni.so"

_GLIBC = re.compile(r"^GLIBC_(\d+)\.(\d+)(?:\.\d+)?$")


@dataclass(frozen=True)
class Policy:
    """What a wheel may depend on: ``manylinux`` up to glibc ``max``, or ``musllinux`` up to
    musl ``max`` (then no ``GLIBC_`` symbol version at all)."""

    family: str  # "manylinux" or "musllinux"
    max: tuple[int, int]

    @property
    def libraries(self) -> frozenset[str]:
        return MANYLINUX_LIBRARIES if self.family == "manylinux" else MUSLLINUX_LIBRARIES

    @property
    def max_glibc(self) -> tuple[int, int] | None:
        return self.max if self.family == "manylinux" else None

    def platform_version(self, platform: str) -> tuple[int, int] | None:
        """``(X, Y)`` of ``<family>_X_Y_<x86_64|aarch64>``, else None."""
        m = re.match(rf"^{self.family}_(\d+)_(\d+)_(x86_64|aarch64)$", platform)
        return (int(m[1]), int(m[2])) if m else None

    def __str__(self) -> str:
        return f"{self.family}_{self.max[0]}_{self.max[1]}"


MANYLINUX_2_28 = Policy("manylinux", (2, 28))


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def check_tags(tags: Iterable[Tag], policy: Policy = MANYLINUX_2_28) -> list[str]:
    """Problems with a wheel's tags: each must be ``cp311-abi3-<policy platform>``."""
    tags = sorted(tags, key=str)
    problems = [] if tags else ["the wheel has no tag"]
    for tag in tags:
        if tag.interpreter != "cp311" or tag.abi != "abi3":
            problems.append(f"tag {tag}: want cp311-abi3 (one wheel for CPython 3.11+)")
        version = policy.platform_version(tag.platform)
        if version is None:
            problems.append(f"tag {tag}: platform is not {policy.family}_X_Y_<x86_64|aarch64>")
        elif version > policy.max:
            problems.append(f"tag {tag}: newer than {policy}")
    return problems


def check_versioned_symbols(
    needs: Mapping[str, Iterable[str]], policy: Policy, what: str
) -> list[str]:
    """Problems with symbol versions ``{library: versions}``: ``GLIBC_`` above the limit."""
    problems = []
    limit = policy.max_glibc
    for lib, versions in sorted(needs.items()):
        for v in sorted(versions):
            m = _GLIBC.match(v)
            if m is not None and (limit is None or (int(m[1]), int(m[2])) > limit):
                problems.append(f"{what}: {lib} symbol version {v} is not allowed by {policy}")
    return problems


def check_elf(
    data: bytes, name: str, policy: Policy = MANYLINUX_2_28, vendored: Iterable[str] = ()
) -> list[str]:
    """Problems with one shared object: its needed libraries and symbol versions."""
    elf = ELFFile(io.BytesIO(data))
    needed: list[str] = []
    versions: dict[str, set[str]] = {}
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(str(getattr(tag, "needed", "")))
        elif isinstance(section, GNUVerNeedSection):
            for verneed, vernaux_iter in section.iter_versions():
                lib = str(verneed.name)
                versions.setdefault(lib, set()).update(str(a.name) for a in vernaux_iter)
    allowed = policy.libraries | set(vendored)
    problems = [
        f"{name}: needs {lib}, which {policy} does not guarantee"
        for lib in needed
        if lib not in allowed
    ]
    if not needed:
        problems.append(f"{name}: has no DT_NEEDED entries (not a dynamic library?)")
    problems += check_versioned_symbols(versions, policy, name)
    glibc = [v for vs in versions.values() for v in vs if _GLIBC.match(v)]
    highest = max((_version(v.removeprefix("GLIBC_")) for v in glibc), default=None)
    shown = f"GLIBC_{highest[0]}.{highest[1]}" if highest else "none"
    print(f"    {name}: needs {', '.join(needed)}; highest GLIBC_ version: {shown}")
    return problems


def check_wheel(
    wheel: Path, policy: Policy = MANYLINUX_2_28, *, require_jvm: bool = False
) -> tuple[list[str], str]:
    """Problems with one wheel file (tags, metadata, ELF, the JVM connector's jar when there is
    one, or always with ``require_jvm``), and its version."""
    name, version, _build, tags = parse_wheel_filename(wheel.name)
    problems = [] if name == "rocketstore" else [f"{wheel.name}: project name is {name}"]
    problems += check_tags(tags, policy)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = f"rocketstore-{version}.dist-info/WHEEL"
        if info in names:
            meta = Parser().parsestr(zf.read(info).decode())
            listed = {t for line in meta.get_all("Tag", []) for t in parse_tag(line.strip())}
            if listed != set(tags):
                problems.append(f"WHEEL tags {sorted(map(str, listed))} != file name tags")
            if meta.get("Root-Is-Purelib", "").strip().lower() != "false":
                problems.append("WHEEL: Root-Is-Purelib is not false")
        else:
            problems.append(f"{wheel.name}: no {info}")
        shared = [n for n in names if n.endswith(".so") or ".so." in n]
        vendored = [n for n in shared if n.startswith("rocketstore.libs/")]
        modules = [n for n in shared if n not in vendored]
        if modules != ["rocketstore/_native.abi3.so"]:
            problems.append(f"extension modules {modules}: want only rocketstore/_native.abi3.so")
        vendored_names = [Path(n).name for n in vendored]
        for module in modules:
            problems += check_elf(zf.read(module), module, policy, vendored_names)
        if JAR in names:
            problems += check_jar(zf.read(JAR), tags, policy)
        elif require_jvm:
            problems.append(f"{wheel.name}: no JVM connector {JAR}")
        if require_jvm:
            problems += [
                f"{wheel.name}: no {f} (the JVM connector's classpath hook)"
                for f in (f"rocketstore-{version}.data/purelib/{PTH}", CLASSPATH_MODULE)
                if f not in names
            ]
    return problems, str(version)


def check_jar(data: bytes, tags: Iterable[Tag], policy: Policy = MANYLINUX_2_28) -> list[str]:
    """Problems with the JVM connector's jar: its entry class, no ``DataSourceRegister``
    service (that would be loaded for every format), and, for each architecture of ``tags``,
    the JNI library inside, checked as an extension module is (:func:`check_elf`)."""
    problems = []
    with zipfile.ZipFile(io.BytesIO(data)) as jar:
        names = set(jar.namelist())
        if "rocketstore/DefaultSource.class" not in names:
            problems.append(f"{JAR}: no rocketstore/DefaultSource.class")
        if f"META-INF/services/{REGISTER_SERVICE}" in names:
            problems.append(f"{JAR}: registers a {REGISTER_SERVICE} service")
        arches = sorted({m[1] for t in tags if (m := re.search(r"(x86_64|aarch64)$", t.platform))})
        if not arches:
            problems.append(f"{JAR}: no x86_64/aarch64 platform tag to check its library for")
        for arch in arches:
            lib = f"{NATIVE_PREFIX}/{native_platform(arch, policy)}/{LIBRARY}"
            if lib not in names:
                problems.append(f"{JAR}: no {lib}")
            else:
                # A musl JVM has libgcc_s loaded (libjvm.so is C++), and Rust's musl cdylibs
                # link it for unwinding; the wheel's extension gets a vendored copy instead.
                extra = ["libgcc_s.so.1"] if policy.family == "musllinux" else []
                problems += check_elf(jar.read(lib), f"{JAR}!/{lib}", policy, extra)
        others = sorted(
            n
            for n in names
            if n.startswith(NATIVE_PREFIX + "/")
            and n.endswith("/" + LIBRARY)
            and n not in {f"{NATIVE_PREFIX}/{native_platform(a, policy)}/{LIBRARY}" for a in arches}
        )
        problems += [f"{JAR}: holds {n}, which is not for this wheel's platform" for n in others]
    return problems


def native_platform(arch: str, policy: Policy) -> str:
    """The jar's directory for the library of ``arch`` under ``policy`` (jvm/build.py names it
    so, and ``rocketstore.spark.NativeLibrary`` looks there): ``linux-<arch>`` for manylinux,
    ``linux-<arch>-musl`` for musllinux."""
    return f"linux-{arch}" + ("-musl" if policy.family == "musllinux" else "")


def check_auditwheel(wheel: Path, policy: Policy = MANYLINUX_2_28) -> list[str]:
    """Runs ``auditwheel show`` (printed) and checks its JSON report."""
    cmd = [sys.executable, "-m", "auditwheel", "show"]
    shown = subprocess.run([*cmd, str(wheel)], capture_output=True, text=True, check=False)
    print(f"$ auditwheel show {wheel}")
    print((shown.stdout + shown.stderr).rstrip())
    if shown.returncode != 0:
        return [f"auditwheel show exited with {shown.returncode}"]
    raw = subprocess.run([*cmd, "--json", str(wheel)], capture_output=True, text=True, check=True)
    report = json.loads(raw.stdout)
    problems = []
    for key in ("overall_tag", "sym_tag"):
        tag = str(report.get(key))
        version = policy.platform_version(tag)
        if version is None or version > policy.max:
            problems.append(f"auditwheel {key} {tag} is not within {policy}")
    if report.get("external_libs"):
        problems.append(f"auditwheel: external libraries to vendor: {report['external_libs']}")
    symbols = report.get("versioned_symbols", {})
    problems += check_versioned_symbols(symbols, policy, "auditwheel")
    return problems


def check_sdist(sdist: Path, version: str | None = None) -> list[str]:
    """Problems with one sdist: name, version, required files, no compiled module."""
    name, sdist_version = parse_sdist_filename(sdist.name)
    problems = [] if name == "rocketstore" else [f"{sdist.name}: project name is {name}"]
    if version is not None and str(sdist_version) != version:
        problems.append(f"sdist version {sdist_version} != wheel version {version}")
    top = f"rocketstore-{sdist_version}/"
    with tarfile.open(sdist) as tar:
        members = {m.name for m in tar.getmembers()}
    problems += [f"sdist lacks {top}{f}" for f in SDIST_REQUIRED if top + f not in members]
    problems += [f"sdist holds a compiled file {m}" for m in sorted(members) if m.endswith(".so")]
    print(f"    {sdist.name}: {len(members)} files")
    return problems


def check_paths(
    paths: Iterable[Path], policy: Policy, *, require_sdist: bool, require_jvm: bool = False
) -> list[str]:
    """Every problem with the wheels and sdists at ``paths`` (files or directories)."""
    files: list[Path] = []
    for p in paths:
        files += sorted(p.glob("rocketstore-*")) if p.is_dir() else [p]
    wheels = [f for f in files if f.name.endswith(".whl")]
    sdists = [f for f in files if f.name.endswith(".tar.gz")]
    if require_sdist and (len(wheels) != 1 or len(sdists) != 1):
        return [f"want one wheel and one sdist, found {[f.name for f in wheels + sdists]}"]
    if not wheels and not sdists:
        return [f"no rocketstore wheel or sdist in {[str(p) for p in paths]}"]
    problems: list[str] = []
    versions: set[str] = set()
    for wheel in wheels:
        print(f"==> {wheel.name}")
        found, version = check_wheel(wheel, policy, require_jvm=require_jvm)
        problems += found + check_auditwheel(wheel, policy)
        versions.add(version)
    for sdist in sdists:
        print(f"==> {sdist.name}")
        problems += check_sdist(sdist, next(iter(versions)) if len(versions) == 1 else None)
    if len(versions) > 1:
        problems.append(f"wheels of different versions: {sorted(versions)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("paths", type=Path, nargs="+", help="wheels, sdists or directories")
    family = parser.add_mutually_exclusive_group()
    family.add_argument("--max-glibc", default="2.28", help="manylinux: highest glibc (2.28)")
    family.add_argument("--musllinux", metavar="X.Y", help="musllinux wheels: highest musl")
    parser.add_argument("--require-sdist", action="store_true", help="exactly 1 wheel + 1 sdist")
    parser.add_argument(
        "--require-jvm", action="store_true", help="each wheel must carry the JVM connector"
    )
    args = parser.parse_args(argv)
    if args.musllinux:
        policy = Policy("musllinux", _version(args.musllinux))
    else:
        policy = Policy("manylinux", _version(args.max_glibc))
    problems = check_paths(
        args.paths, policy, require_sdist=args.require_sdist, require_jvm=args.require_jvm
    )
    for p in problems:
        print(f"ERROR: {p}", file=sys.stderr)
    if not problems:
        print(f"OK: {policy} abi3 wheels and sdists: {' '.join(map(str, args.paths))}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
