"""Check that the release builds of the workspace share their dependencies' artifacts.

``make build`` compiles the Python extension (``rocketstore-py``, by maturin) and the JVM
writer's library (``rocketstore-jni``) one after the other, and ``cargo bench`` the benches
(``rocketstore-benches``), each with ``-p``: Cargo turns on a dependency's features per build,
from the packages that build selects, and a dependency compiled with other features (or under
another proc macro's ``syn``) is compiled again, with everything above it. Each of the three
builds therefore asks for the features the others turn on (the "not used by this crate's code"
lines in ``crates/rocketstore-jni/Cargo.toml`` and ``benches/Cargo.toml``); this script checks
that every package the Python build shares with another has the same features in both, so that
arrow and the engine are compiled once per clean build instead of three times (about a third of
CI's time). Features are not all: a dependency's fingerprint also holds its LTO mode, which
follows what its dependents are, so the Makefile builds the JVM library as maturin builds the
extension (``cargo rustc --lib --crate-type cdylib``: bitcode-only dependencies), and the
``bench`` profile is the ``release`` profile unchanged.

Run: ``python3 tests/check_shared_builds.py`` (``make lint`` runs it). Exits 1 and names each
package whose features differ, and where.
"""

from __future__ import annotations

import subprocess
import sys

BASE = "rocketstore-py"
OTHERS = ("rocketstore-jni", "rocketstore-benches")


def features(package: str) -> dict[str, str]:
    """``name version`` -> comma-separated features of every package in ``package``'s build."""
    out = subprocess.run(
        [
            "cargo",
            "tree",
            "--locked",
            "-p",
            package,
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "-f",
            "{p}|{f}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found: dict[str, str] = {}
    for line in out.splitlines():
        if "|" not in line:
            continue
        name, feats = line.split("|", 1)
        feats = feats.replace(" (*)", "").strip()
        # "arrow-array v59.3.2" or "rocketstore v0.1.0 (/path)" or "syn v3.0.9 (proc-macro)"
        key = " ".join(name.split()[:2])
        found[key] = feats
    return found


def main() -> int:
    base = features(BASE)
    bad = []
    for other in OTHERS:
        theirs = features(other)
        for key in sorted(base.keys() & theirs.keys()):
            if base[key] != theirs[key]:
                bad.append(f"{key}: {BASE} [{base[key]}] but {other} [{theirs[key]}]")
    if bad:
        print("check_shared_builds: features differ, so these are compiled twice:")
        for line in bad:
            print("  " + line)
        print(
            "Ask for the same features in the other crate's Cargo.toml (see the lines marked "
            "'Not used by this crate's code')."
        )
        return 1
    print(f"check_shared_builds: {BASE} shares every dependency with {', '.join(OTHERS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
