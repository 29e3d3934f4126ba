"""Checks the wheel and sdist that ``make wheel`` puts in ``dist/``; exit status 1 on a problem.

Usage: ``python tests/check_wheel.py [--max-glibc 2.28] dist``

The wheel (exactly one ``rocketstore-*.whl``):

* file name and ``WHEEL`` metadata: the same tags, each ``cp311-abi3-manylinux_X_Y_<arch>``
  with glibc ``X.Y`` at most ``--max-glibc``, and ``Root-Is-Purelib: false``;
* one extension module, ``rocketstore/_native.abi3.so``, whose ELF needs only libraries every
  manylinux system has (libc, libm, libdl, libpthread, librt, libgcc_s, the loader; never
  libpython) and no ``GLIBC_`` symbol version above ``--max-glibc`` (read with pyelftools);
* ``auditwheel show`` (printed, then read as JSON): platform tag at most ``--max-glibc``, no
  external library to vendor, no ``GLIBC_`` version above the limit.

The sdist (exactly one ``rocketstore-*.tar.gz``): the same version, everything a build from
source needs (``pyproject.toml``, ``Cargo.toml``, ``Cargo.lock``, the three crates, the Python
package) and no compiled module.
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
from email.parser import Parser
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from packaging.tags import Tag
from packaging.utils import parse_sdist_filename, parse_wheel_filename

__all__ = [
    "ALLOWED_LIBRARIES",
    "check_dist",
    "check_elf",
    "check_sdist",
    "check_tags",
    "check_versioned_symbols",
    "main",
]

#: Shared libraries a manylinux wheel may need from the system (PEP 600's glibc set).
ALLOWED_LIBRARIES = frozenset(
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

#: Files a build from the sdist cannot do without (paths below ``rocketstore-<version>/``).
SDIST_REQUIRED = (
    "PKG-INFO",
    "pyproject.toml",
    "Cargo.toml",
    "Cargo.lock",
    "README.md",
    "crates/rocketstore-format/Cargo.toml",
    "crates/rocketstore/Cargo.toml",
    "crates/rocketstore-py/Cargo.toml",
    "crates/rocketstore-py/src/lib.rs",
    "python/rocketstore/__init__.py",
    "python/rocketstore/_native.pyi",
    "python/rocketstore/py.typed",
    "python/rocketstore/spark/__init__.py",
    "python/pyspark_rocketstore/__init__.py",
)

_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_(x86_64|aarch64)$")
_GLIBC = re.compile(r"^GLIBC_(\d+)\.(\d+)(?:\.\d+)?$")


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def check_tags(tags: frozenset[Tag] | set[Tag], max_glibc: tuple[int, int]) -> list[str]:
    """Problems with a wheel's tags: each must be ``cp311-abi3-manylinux_X_Y_<arch>``."""
    problems = []
    if not tags:
        problems.append("the wheel has no tag")
    for tag in sorted(tags, key=str):
        if tag.interpreter != "cp311" or tag.abi != "abi3":
            problems.append(f"tag {tag}: want cp311-abi3 (one wheel for CPython 3.11+)")
        m = _MANYLINUX.match(tag.platform)
        if m is None:
            problems.append(f"tag {tag}: platform is not manylinux_X_Y_<x86_64|aarch64>")
        elif (int(m[1]), int(m[2])) > max_glibc:
            problems.append(
                f"tag {tag}: needs glibc {m[1]}.{m[2]}, above {max_glibc[0]}.{max_glibc[1]}"
            )
    return problems


def check_versioned_symbols(
    needs: dict[str, list[str]] | dict[str, set[str]], max_glibc: tuple[int, int], what: str
) -> list[str]:
    """Problems with symbol versions, ``{library: versions}``: any ``GLIBC_`` above the limit."""
    problems = []
    for lib, versions in sorted(needs.items()):
        for v in sorted(versions):
            m = _GLIBC.match(v)
            if m is not None and (int(m[1]), int(m[2])) > max_glibc:
                problems.append(
                    f"{what}: {lib} symbol version {v} is above GLIBC_{max_glibc[0]}.{max_glibc[1]}"
                )
    return problems


def check_elf(data: bytes, name: str, max_glibc: tuple[int, int]) -> list[str]:
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
    problems = [
        f"{name}: needs {lib}, which is not a library every manylinux system has"
        for lib in needed
        if lib not in ALLOWED_LIBRARIES
    ]
    if not needed:
        problems.append(f"{name}: has no DT_NEEDED entries (not a dynamic library?)")
    problems += check_versioned_symbols(versions, max_glibc, name)
    glibc = [v for vs in versions.values() for v in vs if _GLIBC.match(v)]
    highest = max((_version(v.removeprefix("GLIBC_")) for v in glibc), default=(0, 0))
    print(f"    {name}: needs {', '.join(needed)}; highest GLIBC_{highest[0]}.{highest[1]}")
    return problems


def check_wheel(wheel: Path, max_glibc: tuple[int, int]) -> tuple[list[str], str]:
    """Problems with the wheel file, and its version."""
    name, version, _build, tags = parse_wheel_filename(wheel.name)
    problems = [] if name == "rocketstore" else [f"{wheel.name}: project name is {name}"]
    problems += check_tags(tags, max_glibc)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = f"rocketstore-{version}.dist-info/WHEEL"
        meta = Parser().parsestr(zf.read(info).decode()) if info in names else None
        if meta is None:
            problems.append(f"{wheel.name}: no {info}")
        else:
            listed = {t for line in meta.get_all("Tag", []) for t in _parse_tag(line)}
            if listed != set(tags):
                problems.append(f"WHEEL tags {sorted(map(str, listed))} != file name tags")
            if meta.get("Root-Is-Purelib", "").strip().lower() != "false":
                problems.append("WHEEL: Root-Is-Purelib is not false")
        modules = [n for n in names if n.endswith(".so") or ".so." in n]
        if modules != ["rocketstore/_native.abi3.so"]:
            problems.append(f"extension modules {modules}: want only rocketstore/_native.abi3.so")
        for module in modules:
            problems += check_elf(zf.read(module), module, max_glibc)
    return problems, str(version)


def _parse_tag(text: str) -> set[Tag]:
    from packaging.tags import parse_tag

    return set(parse_tag(text.strip()))


def check_auditwheel(wheel: Path, max_glibc: tuple[int, int]) -> list[str]:
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
        m = _MANYLINUX.match(tag)
        if m is None or (int(m[1]), int(m[2])) > max_glibc:
            problems.append(f"auditwheel {key} {tag} is not manylinux <= {max_glibc}")
    if report.get("external_libs"):
        problems.append(f"auditwheel: external libraries to vendor: {report['external_libs']}")
    symbols = report.get("versioned_symbols", {})
    problems += check_versioned_symbols(symbols, max_glibc, "auditwheel")
    return problems


def check_sdist(sdist: Path, version: str) -> list[str]:
    """Problems with the sdist: name, version, required files, no compiled module."""
    name, sdist_version = parse_sdist_filename(sdist.name)
    problems = [] if name == "rocketstore" else [f"{sdist.name}: project name is {name}"]
    if str(sdist_version) != version:
        problems.append(f"sdist version {sdist_version} != wheel version {version}")
    top = f"rocketstore-{sdist_version}/"
    with tarfile.open(sdist) as tar:
        members = {m.name for m in tar.getmembers()}
    problems += [f"sdist lacks {top}{f}" for f in SDIST_REQUIRED if top + f not in members]
    problems += [f"sdist holds a compiled file {m}" for m in sorted(members) if m.endswith(".so")]
    print(f"    {sdist.name}: {len(members)} files")
    return problems


def check_dist(dist: Path, max_glibc: tuple[int, int]) -> list[str]:
    """Every problem with the wheel and sdist in ``dist``."""
    wheels = sorted(dist.glob("rocketstore-*.whl"))
    sdists = sorted(dist.glob("rocketstore-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        found = [p.name for p in wheels + sdists]
        return [f"want one wheel and one sdist in {dist}, found {found}"]
    print(f"==> {wheels[0].name}")
    problems, version = check_wheel(wheels[0], max_glibc)
    problems += check_auditwheel(wheels[0], max_glibc)
    print(f"==> {sdists[0].name}")
    problems += check_sdist(sdists[0], version)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("dist", type=Path)
    parser.add_argument("--max-glibc", default="2.28", help="highest glibc allowed (2.28)")
    args = parser.parse_args(argv)
    max_glibc = _version(args.max_glibc)
    problems = check_dist(args.dist, max_glibc)
    for p in problems:
        print(f"ERROR: {p}", file=sys.stderr)
    if not problems:
        print(f"OK: manylinux (glibc <= {args.max_glibc}) abi3 wheel and sdist in {args.dist}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
