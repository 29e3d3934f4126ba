"""Build and packaging guards: the installed package is the one this checkout builds."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

import rocketstore
import rocketstore._native

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "python" / "rocketstore"


def _pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_native_version_matches_package_metadata() -> None:
    # __version__ is the Cargo version; the wheel version is derived from it by maturin.
    native = Version(rocketstore._native.__version__)
    assert native == Version(importlib.metadata.version("rocketstore"))
    assert Version(rocketstore.__version__) == native


def test_native_module_is_built_from_this_checkout() -> None:
    native_file = Path(rocketstore._native.__file__ or "").resolve()
    assert native_file.parent == PACKAGE_DIR, (
        f"rocketstore._native was imported from {native_file}, not from {PACKAGE_DIR}; "
        "run `make build`"
    )


def test_typing_files_ship_with_the_package() -> None:
    assert (PACKAGE_DIR / "py.typed").is_file()
    assert (PACKAGE_DIR / "_native.pyi").is_file()


def test_console_script_is_registered() -> None:
    scripts = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="console_scripts")}
    assert scripts.get("rocketstore") == "rocketstore.cli:main"


def test_requirements_dev_covers_pyproject() -> None:
    """`make build` installs requirements-dev.txt, so it must list every declared dependency."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    declared = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        declared += [Requirement(r) for r in extra]

    listed: set[str] = set()
    for raw in (ROOT / "requirements-dev.txt").read_text().splitlines():
        spec = re.sub(r"#.*", "", raw).strip()
        if spec:
            listed.add(canonicalize_name(Requirement(spec).name))

    missing = sorted({canonicalize_name(r.name) for r in declared} - listed)
    assert not missing, f"add to requirements-dev.txt: {missing}"


def test_configuration_doc_lists_every_field() -> None:
    """docs/configuration.md has one row per config field, with its current default and range."""
    rows = {
        line.split("|")[1].strip().strip("`"): line
        for line in (ROOT / "docs" / "configuration.md").read_text().splitlines()
        if line.startswith("| `")
    }
    fields = rocketstore.config_fields()
    assert sorted(rows) == sorted(f.name for f in fields)
    for f in fields:
        cells = [c.strip() for c in rows[f.name].split("|")[1:-1]]
        if isinstance(f.default, bool):
            want_range = "true / false"
        elif f.min is None and f.max is None:
            want_range = "see meaning"
        else:
            want_range = f"{f.min}..={f.max}"
        assert cells[1] == f"`{f.default}`", f.name
        assert cells[2] == want_range, f.name
        assert cells[3] == (f"`{f.rocketmq_name}`" if f.rocketmq_name else "*ours*"), f.name
        assert cells[4] == " ".join(f.doc.split()), f.name
