"""Fails if the modules of a Python package import each other in a circle.

Every import counts: at module level, inside functions (deferred imports) and under
``if TYPE_CHECKING:``. A circle is a design fault even when deferring an import hides it at
run time: it means two files each need the other, so neither can be read, tested or moved
alone. An import names the module it loads (``from pkg import sub`` names ``pkg.sub`` when
``sub`` is a module); a submodule does not depend on its package's ``__init__`` by being
inside it, only by importing it.

Usage: ``python tests/check_python_imports.py [PACKAGE_DIR ...]`` (default:
``python/rocketstore``). Prints each circle found (as ``a -> b -> a``) and exits 1 if there
is one; ``make lint`` runs it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "python" / "rocketstore"


def modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py``/``.pyi`` module under ``package_dir``."""
    root = package_dir.parent
    found: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py*")):
        if path.suffix not in (".py", ".pyi") or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        # A .pyi stands for a compiled module (e.g. _native); a .py beside it wins.
        if path.suffix == ".py" or name not in found:
            found[name] = path
    return found


def _imported(node: ast.AST, here: str, is_package: bool) -> Iterator[str]:
    """The dotted names one import statement loads (before resolving to known modules)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = here.split(".")
            # `from . import x` in a package's __init__ is relative to the package itself.
            drop = node.level - 1 if is_package else node.level
            base = base[: len(base) - drop] if drop else base
            prefix = ".".join(base)
            target = f"{prefix}.{node.module}" if node.module else prefix
        else:
            target = node.module or ""
        for alias in node.names:
            yield f"{target}.{alias.name}"
        yield target


def _resolve(name: str, known: Iterable[str]) -> str | None:
    """The longest known module that ``name`` is or lies in (None: outside the package)."""
    known_set = set(known)
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known_set:
            return candidate
    return None


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (itself excluded)."""
    mods = modules(package_dir)
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.stem == "__init__"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if isinstance(node, ast.ImportFrom):
                # `from pkg import a, b`: each name that is a module is the import; the
                # package itself only if some name is not a module (an attribute of it).
                targets = list(_imported(node, name, is_package))
                base = targets.pop()
                resolved = {_resolve(t, mods) for t in targets}
                if any(r is None or r == _resolve(base, mods) for r in resolved):
                    resolved.add(_resolve(base, mods))
            else:
                resolved = {_resolve(t, mods) for t in _imported(node, name, is_package)}
            graph[name].update(r for r in resolved if r is not None and r != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_path_through(sorted(component), graph))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _path_through(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A closed walk from the component's first module back to itself (breadth first)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    return [*component, start]


def main(argv: list[str]) -> int:
    dirs = [Path(a) for a in argv] or [DEFAULT]
    failed = False
    for package_dir in dirs:
        graph = import_graph(package_dir)
        found = cycles(graph)
        edges = sum(len(v) for v in graph.values())
        if found:
            failed = True
            for circle in found:
                print(f"import circle in {package_dir}: {' -> '.join(circle)}", file=sys.stderr)
        else:
            print(f"{package_dir}: {len(graph)} modules, {edges} imports, no circle")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
