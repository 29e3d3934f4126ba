"""Check the Rust crates' layering: no import circle in any crate, no upward import.

For every crate of the workspace (``CRATES``), reads each ``src/**/*.rs`` file (test-only code
excluded: ``tests.rs`` files and everything after a ``#[cfg(test)]`` module), collects the
``crate::...`` paths it names (``use`` statements, brace groups expanded, and paths written
inline) and ``super::`` paths, resolves each to the module *file* that defines it (a name the
crate root re-exports with ``pub use module::Name`` resolves to that module), and checks:

1. No import circle between the files of a crate: each crate's file graph is acyclic (a module
   and its own submodule files count as distinct files; ``mod.rs``/``foo.rs`` declaring
   ``mod bar;`` is not an import).
2. In a crate with layers (the engine, ``ENGINE_LAYERS``; the Arrow crate, ``ARROW_LAYERS``),
   every file lies in one layer and imports only files of its own layer or lower ones; in
   particular nothing below ``service`` imports ``service/`` in the engine.
3. Between crates (``Cargo.toml`` ``[dependencies]``): a crate depends only on crates below it
   (format < engine < arrow < the bindings and the benches), and the crates below the bindings
   never depend on PyO3 or JNI (house rule 1).

Run: ``python3 tests/check_layering.py`` (``make lint`` runs it). ``--graph`` prints each
crate's file graph. Exits 1 and names each offending import on failure.

>>> sorted(expand("a::{b, c::{d, e}}"))
['a::b', 'a::c::d', 'a::c::e']
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest layer first. A file may import files of its own layer or of a lower one. Entries
# name module paths ("segment" covers segment.rs or segment/mod.rs and every file below it).
ENGINE_LAYERS: list[tuple[str, list[str]]] = [
    (
        "foundation: no engine state",
        [
            "error",
            "util",
            "mmap",
            "probe",
            "failpoints",
            "json",
            "config",
            "compression",
            "message",
            "stats",
            "powerloss",
        ],
    ),
    (
        "files and signals: mapped segments, the directory lock, checkpoint, service signals, "
        "the progress page",
        ["segment", "lock", "checkpoint", "signal", "progress"],
    ),
    (
        "engine structures: commit log, consume queues, index, dispatch, reads, validation",
        [
            "commitlog",
            "consume_queue",
            "index",
            "dispatch",
            "feed",
            "offsets",
            "longpoll",
            "read",
            "validate",
            "bulk",
        ],
    ),
    ("background services (threads around run_once)", ["service"]),
    (
        "recovery, offline repair and the geometry a store's files give",
        ["recovery", "rebuild", "tail_index", "geometry"],
    ),
    (
        "the store, its followers in other processes and what reads a whole store",
        ["store", "follow", "verify", "lib"],
    ),
]

# The Arrow crate: the pools and errors below the readers and writers, the Spark paths above.
ARROW_LAYERS: list[tuple[str, list[str]]] = [
    ("foundation: errors, buffer pools, the build threads", ["error", "buffer_pool", "build_pool"]),
    ("Arrow reads and writes of one store", ["arrow_read", "put"]),
    ("Spark's read and write paths", ["spark_read", "spark_write"]),
    ("the crate root", ["lib"]),
]

# Every crate of the workspace, lowest first: its directory, its rank (a crate may depend only
# on crates of a lower rank), and its module layers (None: only the no-circle rule).
CRATES: list[tuple[str, str, int, list[tuple[str, list[str]]] | None]] = [
    ("rocketstore-format", "crates/rocketstore-format", 0, None),
    ("rocketstore", "crates/rocketstore", 1, ENGINE_LAYERS),
    ("rocketstore-arrow", "crates/rocketstore-arrow", 2, ARROW_LAYERS),
    ("rocketstore-py", "crates/rocketstore-py", 3, None),
    ("rocketstore-jni", "crates/rocketstore-jni", 3, None),
    ("rocketstore-benches", "benches", 3, None),
]

# Crates only the bindings may depend on (house rule 1: the core never imports PyO3).
BINDING_ONLY = {"pyo3", "pyo3-arrow", "jni"}
# Below this rank a crate is core (no binding dependency).
BINDING_RANK = 3

USE_RE = re.compile(r"\buse\s+((?:crate|super|self)\b[^;]*);", re.S)
INLINE_RE = re.compile(r"\b(crate(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
SUPER_RE = re.compile(r"\b((?:super::)+[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)")
CFG_TEST_MOD_RE = re.compile(
    r"^#\[cfg\(test\)\]\s*\n\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+\w+\s*\{", re.M
)
COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def expand(path: str) -> list[str]:
    """Expands one ``use`` tree (``a::{b, c::{d}}``) into flat paths."""
    path = re.sub(r"\s+", "", path)
    i = path.find("{")
    if i < 0:
        return [re.sub(r"\bas\b.*$", "", path)] if path else []
    prefix = path[:i]
    depth, start, parts = 0, i + 1, []
    for j in range(i, len(path)):
        c = path[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                parts.append(path[start:j])
                break
        elif c == "," and depth == 1:
            parts.append(path[start:j])
            start = j + 1
    out: list[str] = []
    for p in parts:
        for q in expand(p):
            if q == "self":
                out.append(prefix.rstrip(":"))
            elif q:
                out.append(prefix + q)
    return out


def module_of(src: Path, file: Path) -> list[str]:
    """The module path of a source file (``service/mod.rs`` -> ``['service']``)."""
    rel = file.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts.pop()
    if parts in (["lib"], ["main"]):
        return ["lib"]
    return parts or ["lib"]


def strip_tests(text: str) -> str:
    text = COMMENT_RE.sub("", text)
    tests = CFG_TEST_MOD_RE.search(text)
    return text[: tests.start()] if tests else text


Module = tuple[str, ...]


def file_graph(src: Path) -> tuple[dict[Module, Path], dict[Module, set[Module]]]:
    """The crate's files and, for each, the files it imports."""
    files = sorted(p for p in src.rglob("*.rs") if p.name != "tests.rs")
    modules = {tuple(module_of(src, f)): f for f in files}
    texts = {m: strip_tests(f.read_text()) for m, f in modules.items()}

    # Names the crate root re-exports (`pub use error::{Error, Result};`) -> their module.
    reexports: dict[str, Module] = {}
    for use in re.finditer(r"\bpub\s+use\s+([^;]*);", texts.get(("lib",), "")):
        for p in expand(use.group(1)):
            segs = p.split("::")
            if segs[0] == "crate":
                segs = segs[1:]
            if len(segs) >= 2 and (segs[0],) in modules:
                reexports[segs[-1]] = (segs[0],)

    def resolve(segments: list[str]) -> Module | None:
        for n in range(len(segments), 0, -1):
            key = tuple(segments[:n])
            if key in modules:
                return key
        if segments and segments[0] in reexports:
            return reexports[segments[0]]
        return None

    graph: dict[Module, set[Module]] = {m: set() for m in modules}
    for mod, text in texts.items():
        paths: list[str] = []
        for use in USE_RE.finditer(text):
            paths.extend(expand(use.group(1)))
        paths.extend(INLINE_RE.findall(text))
        paths.extend(SUPER_RE.findall(text))
        # `super` of a mod.rs file is its parent module; of foo/bar.rs, it is foo.
        here = list(mod) if mod != ("lib",) else []
        for p in paths:
            segs = p.split("::")
            if segs[0] == "crate":
                segs = segs[1:]
            elif segs[0] == "self":
                segs = here + segs[1:]
            else:
                base = list(here)
                while segs and segs[0] == "super":
                    base = base[:-1]
                    segs = segs[1:]
                segs = base + segs
            target = resolve(segs)
            if target is not None and target != mod:
                graph[mod].add(target)
    return modules, graph


def circles(graph: dict[Module, set[Module]]) -> list[list[Module]]:
    """The strongly connected components of more than one file (Tarjan)."""
    index: dict[Module, int] = {}
    low: dict[Module, int] = {}
    stack: list[Module] = []
    on_stack: set[Module] = set()
    sccs: list[list[Module]] = []

    def strong(v: Module) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sccs


def check_crate(
    crate: str, src: Path, layers: list[tuple[str, list[str]]] | None, show: bool
) -> tuple[int, list[str]]:
    """Checks one crate's files; returns the number of files and the errors."""
    modules, graph = file_graph(src)

    def name(m: Module) -> str:
        return f"{crate}/{modules[m].relative_to(src)}"

    if show:
        for m in sorted(graph):
            print(f"{name(m)} -> {', '.join(sorted(name(t) for t in graph[m]))}")

    errors: list[str] = []
    if layers is not None:

        def layer_of(m: Module) -> int | None:
            for i, (_, roots) in enumerate(layers):
                if m[0] in roots:
                    return i
            return None

        for m in sorted(graph):
            lm = layer_of(m)
            if lm is None:
                errors.append(f"{name(m)}: not in any layer of tests/check_layering.py")
                continue
            for t in sorted(graph[m]):
                lt = layer_of(t)
                if lt is not None and lt > lm:
                    errors.append(
                        f"{name(m)} (layer {lm}: {layers[lm][0]}) imports {name(t)} "
                        f"(higher layer {lt}: {layers[lt][0]})"
                    )

    for comp in circles(graph):
        members = set(comp)
        edges = sorted(f"{name(a)} -> {name(b)}" for a in comp for b in graph[a] if b in members)
        errors.append("import circle: " + "; ".join(edges))
    return len(modules), errors


def dependencies(manifest: Path) -> set[str]:
    """The names in a Cargo.toml's [dependencies] table (not dev- or build-dependencies)."""
    names: set[str] = set()
    section = ""
    for raw in manifest.read_text().splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
            continue
        m = re.match(r"([A-Za-z0-9_-]+)(?:\.workspace)?\s*=", line)
        if m and section == "[dependencies]":
            names.add(m.group(1))
    return names


def check_crate_deps() -> list[str]:
    rank = {name: r for name, _, r, _ in CRATES}
    errors: list[str] = []
    for name, rel, r, _ in CRATES:
        deps = dependencies(ROOT / rel / "Cargo.toml")
        for d in sorted(deps):
            if d in rank and rank[d] >= r:
                errors.append(f"crate {name} (rank {r}) depends on {d} (rank {rank[d]})")
            if r < BINDING_RANK and d in BINDING_ONLY:
                errors.append(f"crate {name} depends on {d}: only the bindings may (house rule 1)")
    return errors


def main(argv: list[str]) -> int:
    show = "--graph" in argv
    errors = check_crate_deps()
    files = 0
    for name, rel, _, layers in CRATES:
        src = ROOT / rel / "src"
        if not src.is_dir():
            errors.append(f"crate {name}: no {rel}/src")
            continue
        n, errs = check_crate(name, src, layers, show)
        files += n
        errors.extend(errs)
    members = re.search(r"members\s*=\s*\[([^\]]*)\]", (ROOT / "Cargo.toml").read_text())
    listed = {rel for _, rel, _, _ in CRATES}
    for member in re.findall(r'"([^"]+)"', members.group(1) if members else ""):
        if member not in listed:
            errors.append(f"workspace member {member} is not in tests/check_layering.py CRATES")

    for e in errors:
        print(f"check_layering: {e}", file=sys.stderr)
    if errors:
        return 1
    print(
        f"check_layering: {files} files in {len(CRATES)} crates: no import circle, "
        "no upward import (engine and Arrow layers, crate order, no PyO3/JNI below the bindings)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
