"""Check the engine crate's module layering: no import circle, no upward import.

Reads every ``crates/rocketstore/src/**/*.rs`` file (test-only code excluded: ``tests.rs``
files and everything after a ``#[cfg(test)]`` module), collects the ``crate::...`` paths it
names (``use`` statements, brace groups expanded, and paths written inline) and ``super::``
paths, resolves each to the module *file* that defines it, and checks two rules:

1. No import circle between files: the file graph is acyclic (a module and its own
   submodule files count as distinct files; ``mod.rs``/``foo.rs`` declaring ``mod bar;`` is
   not an import).
2. Every file lies in one of the layers in ``LAYERS`` and imports only files of its own
   layer or lower ones; in particular nothing below ``service`` imports ``service/``.

Run: ``python3 tests/check_layering.py`` (``make lint`` runs it). ``--graph`` prints the
file graph. Exits 1 and names each offending import on failure.

>>> sorted(expand("a::{b, c::{d, e}}"))
['a::b', 'a::c::d', 'a::c::e']
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "crates" / "rocketstore" / "src"

# Lowest layer first. A file may import files of its own layer or of a lower one. Entries
# name module paths ("segment" covers segment.rs or segment/mod.rs and every file below it).
LAYERS: list[tuple[str, list[str]]] = [
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
        "files and signals: mapped segments, the directory lock, checkpoint, service signals",
        ["segment", "lock", "checkpoint", "signal"],
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
        "recovery and offline repair",
        ["recovery", "rebuild", "tail_index"],
    ),
    ("the store and what reads a whole store", ["store", "verify", "lib"]),
]

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


def module_of(file: Path) -> list[str]:
    """The module path of a source file (``service/mod.rs`` -> ``['service']``)."""
    rel = file.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts.pop()
    return parts or ["lib"]


def strip_tests(text: str) -> str:
    text = COMMENT_RE.sub("", text)
    tests = CFG_TEST_MOD_RE.search(text)
    return text[: tests.start()] if tests else text


def main(argv: list[str]) -> int:
    files = sorted(p for p in SRC.rglob("*.rs") if p.name != "tests.rs")
    modules = {tuple(module_of(f)): f for f in files}

    def resolve(segments: list[str]) -> tuple[str, ...] | None:
        for n in range(len(segments), 0, -1):
            key = tuple(segments[:n])
            if key in modules:
                return key
        return None

    graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in modules}
    for mod, file in modules.items():
        text = strip_tests(file.read_text())
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

    def name(m: tuple[str, ...]) -> str:
        return str(modules[m].relative_to(SRC))

    if "--graph" in argv:
        for m in sorted(graph):
            print(f"{name(m)} -> {', '.join(sorted(name(t) for t in graph[m]))}")

    def layer_of(m: tuple[str, ...]) -> int | None:
        for i, (_, roots) in enumerate(LAYERS):
            if m[0] in roots:
                return i
        return None

    errors: list[str] = []
    for m in sorted(graph):
        lm = layer_of(m)
        if lm is None:
            errors.append(f"{name(m)}: not in any layer of tests/check_layering.py LAYERS")
            continue
        for t in sorted(graph[m]):
            lt = layer_of(t)
            if lt is not None and lt > lm:
                errors.append(
                    f"{name(m)} (layer {lm}: {LAYERS[lm][0]}) imports {name(t)} "
                    f"(higher layer {lt}: {LAYERS[lt][0]})"
                )

    # Cycles: Tarjan's strongly connected components over the file graph.
    index: dict[tuple[str, ...], int] = {}
    low: dict[tuple[str, ...], int] = {}
    stack: list[tuple[str, ...]] = []
    on_stack: set[tuple[str, ...]] = set()
    sccs: list[list[tuple[str, ...]]] = []

    def strong(v: tuple[str, ...]) -> None:
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
    for comp in sccs:
        members = set(comp)
        edges = sorted(f"{name(a)} -> {name(b)}" for a in comp for b in graph[a] if b in members)
        errors.append("import circle: " + "; ".join(edges))

    for e in errors:
        print(f"check_layering: {e}", file=sys.stderr)
    if errors:
        return 1
    print(
        f"check_layering: {len(modules)} engine files in {len(LAYERS)} layers: "
        "no circle, no upward import"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
