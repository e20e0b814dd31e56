"""Import layering: no import circle inside a package, lower layers never import higher ones, and
no function over 60 lines in the controller and the worker.

Circles make import order matter and force function-level imports; the layers keep the
P4 target usable without the controller or the worker. Run this file as a script to print
every circle, by kind, for all packages (not only the asserted ones).
"""

from __future__ import annotations

import ast
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


# Packages whose functions must fit on a screen (the planner's and the worker's logic is read often).
SHORT_FUNCTIONS = ["controller", "worker"]
MAX_FUNCTION_LINES = 60


def test_functions_in_the_controller_and_worker_stay_short():
    long = []
    for package in SHORT_FUNCTIONS:
        for path in sorted(PACKAGES[package].rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


if __name__ == "__main__":
    sys.exit(main())
