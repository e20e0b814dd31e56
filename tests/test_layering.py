"""Import layering: no import circle inside a package, lower layers never import higher ones, and
no function over 60 lines in any Python file of the checkout (but the named exceptions).

Circles make import order matter and force function-level imports; the layers keep the
P4 target usable without the controller or the worker. Run this file as a script to print
every circle, by kind, for all packages (not only the asserted ones).
"""

from __future__ import annotations

import ast
import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Package name -> folder (bmv2env lives in bmv2-env/, see pyproject.toml).
PACKAGES: dict[str, Path] = {
    "p4target": ROOT / "p4target",
    "controller": ROOT / "controller",
    "worker": ROOT / "worker",
    "bmv2env": ROOT / "bmv2-env",
    "p4src": ROOT / "p4src",  # the P4 programs as package data: the bottom layer
    "ina_api": ROOT / "ina_api",  # the controller service's API and client: below the worker and the controller
    "virtual_fabric": ROOT / "virtual_fabric",  # the simulator: runs the others, the top layer
}

# Packages whose circles fail the test (bmv2env is only reported).
NO_CIRCLES = ["p4target", "controller", "worker", "virtual_fabric", "ina_api"]

# Package -> packages it must never import (at any level, even under TYPE_CHECKING).
FORBIDDEN: dict[str, list[str]] = {
    "p4target": ["controller", "worker", "bmv2env", "virtual_fabric"],
    "worker": ["controller", "bmv2env", "virtual_fabric"],
    "controller": ["bmv2env", "virtual_fabric"],
    "p4src": ["p4target", "controller", "worker", "bmv2env", "virtual_fabric"],
    "ina_api": ["p4src", "p4target", "controller", "worker", "bmv2env", "virtual_fabric"],
}

# Import kinds: at module level, inside a function (runs later), under `if TYPE_CHECKING:`.
TOP, FUNCTION, TYPING = "top", "function", "typing"


@dataclass(frozen=True)
class Edge:
    """One import of a module of a known package by another."""

    source: str
    target: str
    kind: str
    line: int


def module_names(package: str, folder: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package."""
    names: dict[str, Path] = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join([package, *parts])] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement with its kind; TYPE_CHECKING wins over FUNCTION."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def walk(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, kind))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    walk(ast.Module(body=[stmt], type_ignores=[]), TYPING)
                for stmt in child.orelse:
                    walk(ast.Module(body=[stmt], type_ignores=[]), kind)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                walk(child, TYPING if kind == TYPING else FUNCTION)
            else:
                walk(child, kind)

    walk(tree, TOP)
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` is or lies inside of (a.b.C -> a.b)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def collect_edges(known: dict[str, Path]) -> list[Edge]:
    """Imports between known modules; `from pkg import mod` points at the submodule."""
    edges: list[Edge] = []
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        for node, kind in _imports(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = module.split(".")
                    if not is_package:
                        anchor = anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base]) if base else ".".join(anchor)
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                resolved = _resolve(target, known)
                if resolved is not None and resolved != module:
                    edges.append(Edge(module, resolved, kind, node.lineno))
    return edges


def circles(edges: list[Edge], kinds: set[str]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), sorted."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        if edge.kind in kinds:
            graph.setdefault(edge.source, set()).add(edge.target)
            graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def package_edges(package: str) -> list[Edge]:
    """Imports from modules of `package` to modules of any known package."""
    known: dict[str, Path] = {}
    for name, folder in PACKAGES.items():
        known.update(module_names(name, folder))
    return [e for e in collect_edges(known) if e.source.split(".")[0] == package]


def package_circles(package: str) -> dict[str, list[list[str]]]:
    """Circles inside `package`: at run time (top + function) and counting TYPE_CHECKING too."""
    inside = [e for e in package_edges(package) if e.target.split(".")[0] == package]
    return {
        "runtime": circles(inside, {TOP, FUNCTION}),
        "all": circles(inside, {TOP, FUNCTION, TYPING}),
    }


def test_circles_found_by_this_check():
    """The checker itself sees a circle made of a function-level import."""
    edges = [Edge("a", "b", TOP, 1), Edge("b", "c", TOP, 1), Edge("c", "a", FUNCTION, 1), Edge("d", "a", TOP, 1)]
    assert circles(edges, {TOP, FUNCTION}) == [["a", "b", "c"]]
    assert circles(edges, {TOP}) == []


def test_no_import_circles():
    for package in NO_CIRCLES:
        assert package_circles(package)["all"] == [], f"import circles in {package}/"


def test_lower_layers_do_not_import_higher_ones():
    for package, forbidden in FORBIDDEN.items():
        bad = [e for e in package_edges(package) if e.target.split(".")[0] in forbidden]
        assert bad == [], f"{package}/ imports " + ", ".join(f"{e.target} ({e.source}:{e.line})" for e in bad)


def main() -> int:
    """Print every package's circles (runtime, and with TYPE_CHECKING imports)."""
    for package in PACKAGES:
        for which, found in package_circles(package).items():
            for component in found:
                print(f"{package} {which}: {' <-> '.join(component)}")
    return 0


# Every function must fit on a screen: the code is read far more often than written.
MAX_FUNCTION_LINES = 60
# Folders the walk must find Python in (bmv2env lives in bmv2-env/); it reads every other folder too (scripts/).
PYTHON_FOLDERS = ["bench", "bmv2-env", "controller", "examples", "ina_api", "p4src", "p4target", "tests",
                  "virtual_fabric", "worker"]
NOT_SOURCE = {"__pycache__", "build"}  # and any folder starting with "." (.venv, .git) or ending in .egg-info
OUTPUT = [ROOT / "bench" / "out", ROOT / "bench" / "results"]  # what the benchmarks write (.gitignore)
# "path:qualname" -> why it may stay over MAX_FUNCTION_LINES.  An entry whose function is gone or short fails too.
EXCEPTIONS: dict[str, str] = {}


def python_files() -> list[Path]:
    """Every Python file of the checkout (generated ones too) but virtualenvs, caches, build and benchmark output."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [f for f in subfolders if not (f.startswith(".") or f in NOT_SOURCE or f.endswith(".egg-info")
                                                       or Path(folder, f) in OUTPUT)]  # not walked at all
        found += [Path(folder, f) for f in files if f.endswith(".py")]
    return sorted(found)


def function_lengths(path: Path) -> dict[str, int]:
    """``qualname`` (Class.method, outer.inner) -> lines, for every function of a file."""
    lengths: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    lengths[name] = max(lengths.get(name, 0), child.end_lineno - child.lineno + 1)
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(path.read_text(), filename=str(path)), "")
    return lengths


@functools.cache
def long_functions() -> dict[str, int]:
    """"path:qualname" -> lines, for every function over MAX_FUNCTION_LINES in the checkout."""
    return {f"{path.relative_to(ROOT).as_posix()}:{name}": lines
            for path in python_files() for name, lines in function_lengths(path).items()
            if lines > MAX_FUNCTION_LINES}


def test_function_lengths_name_methods_and_nested_functions(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("class A:\n    def f(self):\n        def g():\n            pass\n        return g\n\n\n"
                      "async def h():\n    pass\n")
    assert function_lengths(source) == {"A.f": 4, "A.f.g": 2, "h": 2}


def test_the_length_rule_reads_every_folder_of_python():
    folders = {path.relative_to(ROOT).parts[0] for path in python_files()}
    assert set(PYTHON_FOLDERS) <= folders, sorted(set(PYTHON_FOLDERS) - folders)
    assert not [p for p in python_files() if p.parent == ROOT], "a Python file at the top of the checkout"
    assert ROOT / "tests" / "p4" / "gen_ina_stf.py" in python_files()  # folders below folders too


def test_functions_stay_short_everywhere():
    long = {key: lines for key, lines in long_functions().items() if key not in EXCEPTIONS}
    assert not long, f"over {MAX_FUNCTION_LINES} lines (split them, or name them in EXCEPTIONS with a reason): {long}"


def test_the_length_exceptions_are_not_stale():
    """An exception that no longer applies (the function split, renamed or gone) must leave the list."""
    long = long_functions()
    stale = sorted(key for key in EXCEPTIONS if key not in long)
    assert not stale, f"no longer over {MAX_FUNCTION_LINES} lines or no longer there: remove from EXCEPTIONS: {stale}"
    assert all(reason.strip() for reason in EXCEPTIONS.values())


if __name__ == "__main__":
    sys.exit(main())
