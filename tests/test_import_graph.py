"""Imports in ``src/opbench`` run one way, and private names stay in their module.

The graph is built from the source with :mod:`ast`, not by importing: every ``import`` and
``from ... import`` statement counts, at module level, inside a function (an import
inside a function is the usual way to hide a cycle, so it is not an excuse here) and
under ``if TYPE_CHECKING:``; in a module that calls ``importlib.import_module``, every
opbench module named in a string constant counts as imported too. In ``from opbench.x import y`` the edge goes to ``opbench.x.y`` when that is a
module, else to ``opbench.x``.

Two checks:

* no cycle between modules (a cycle is reported as ``a -> b -> a``);
* no name with a leading underscore (not a dunder) imported from another opbench module,
  or read as an attribute of an imported opbench module (``pool._children``), except
  between the kernel helpers of ``opbench.kernels._lib`` (Triton functions shared by
  the files of one op family); the package name ``_lib`` itself is the kernel-directory
  contract's. A name shared across modules is an interface: give it a public name.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "opbench"
KERNEL_LIB = "opbench.kernels._lib"

#: Cycles that cannot be broken, each with the reason. Empty: every cycle was broken.
#: An entry is the sorted tuple of the cycle's modules.
ALLOWED_CYCLES: dict[tuple[str, ...], str] = {}

#: Private names that may cross modules, as (importing module, imported module) -> why.
#: Empty: every shared name is public.
ALLOWED_PRIVATE_PAIRS: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


@functools.cache
def _tree(name: str) -> ast.Module:
    """The module's syntax tree, parsed once for every check of the run (the checks only
    read it): parsing the package took 1.1 s, and each check parsed it again."""
    path = MODULES[name]
    return ast.parse(path.read_text(), filename=str(path))


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # the opbench module the statement loads
    name: str | None  # the name taken from it (``from target import name``), if any
    line: int


def _base(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = importer if _is_package(importer) else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def imports_of(name: str) -> Iterator[Import]:
    tree = _tree(name)
    if any(isinstance(n, ast.Call) and _is_import_module(n.func) for n in ast.walk(tree)):
        # a module that imports by name: every opbench module it spells counts (a table
        # of command modules looped over with import_module is still an import of each)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in MODULES:
                yield Import(name, node.value, None, node.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "opbench" and alias.name in MODULES:
                    yield Import(name, alias.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _base(name, node)
            if base.split(".")[0] != "opbench":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:
                    yield Import(name, sub, None, node.lineno)
                elif base in MODULES:
                    yield Import(name, base, alias.name, node.lineno)


def _is_import_module(func: ast.expr) -> bool:
    """``importlib.import_module`` or a bare ``import_module``."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id == "import_module"


@functools.cache
def _imports(name: str) -> tuple[Import, ...]:
    """:func:`imports_of`, found once for every check of the run."""
    return tuple(imports_of(name))


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for imp in _imports(m):
            if imp.target != m:
                edges[m].add(imp.target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module
    (Tarjan's algorithm, then a shortest path back to the start inside the component)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the module count
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)

    found = []
    for component in components:
        start = min(component)
        paths = {start: [start]}
        frontier = [start]
        cycle = None
        while frontier and cycle is None:
            nxt = []
            for v in frontier:
                for w in sorted(edges[v] & component):
                    if w == start:
                        cycle = paths[v] + [start]
                        break
                    if w not in paths:
                        paths[w] = paths[v] + [w]
                        nxt.append(w)
                if cycle:
                    break
            frontier = nxt
        found.append(cycle or sorted(component))
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _exempt(importer: str, target: str) -> bool:
    in_lib = importer.startswith(KERNEL_LIB + ".") and target.startswith(KERNEL_LIB)
    return in_lib or (importer, target) in ALLOWED_PRIVATE_PAIRS


def private_imports() -> list[str]:
    found = []
    for m, path in MODULES.items():
        rel = path.relative_to(SRC.parent)
        bound: dict[str, str] = {}  # local name -> the opbench module it names
        for imp in _imports(m):
            if imp.target == m or _exempt(m, imp.target):
                continue
            if imp.name is not None and _private(imp.name):
                found.append(f"{rel}:{imp.line}: {imp.name} from {imp.target}")
        tree = _tree(m)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in MODULES and alias.asname:
                        bound[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = _base(m, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in MODULES:
                        bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            target = _dotted(node.value, bound)
            if target and target != m and not _exempt(m, target):
                found.append(f"{rel}:{node.lineno}: {node.attr} of {target}")
    return sorted(set(found))


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The opbench module an expression names (``pool`` bound by an import, or the
    dotted path ``opbench.run.pool``), or None."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "opbench":
        dotted = ".".join(["opbench", *reversed(parts)])
        return dotted if dotted in MODULES else None
    return None


def test_the_graph_sees_the_package() -> None:
    edges = graph()
    assert "opbench.cli" in edges and "opbench.run.session" in edges
    assert sum(len(v) for v in edges.values()) > 200
    # a function-level import counts: the session imports the program runner in run()
    assert "opbench.programs.runner" in edges["opbench.run.session"]
    # and the cycle finder finds one
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_cycles() -> None:
    edges = graph()
    unexpected = []
    for c in cycles(edges):
        if tuple(sorted(set(c))) in ALLOWED_CYCLES:
            continue
        line = " -> ".join(c)
        tangled = component_of(c[0], edges) - set(c)
        if tangled:  # more modules are caught in the same knot
            line += f"  (with {', '.join(sorted(tangled))})"
        unexpected.append(line)
    assert not unexpected, "import cycles:\n" + "\n".join(unexpected)


def component_of(module: str, edges: dict[str, set[str]]) -> set[str]:
    """The modules that both reach ``module`` and are reached from it."""

    def reach(start: str, out: dict[str, set[str]]) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for w in out[todo.pop()] - seen:
                seen.add(w)
                todo.append(w)
        return seen

    back: dict[str, set[str]] = {v: set() for v in edges}
    for v, ws in edges.items():
        for w in ws:
            back[w].add(v)
    return reach(module, edges) & reach(module, back)


def test_allowed_cycles_still_exist() -> None:
    present = {tuple(sorted(set(c))) for c in cycles(graph())}
    assert set(ALLOWED_CYCLES) <= present, "drop the allow-list entries that are gone"


def test_no_private_names_across_modules() -> None:
    found = private_imports()
    assert not found, "private names used across modules:\n" + "\n".join(found)
