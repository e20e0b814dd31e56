"""Results and figures go through one library: bench/common.py.

Every benchmark and example writes its CSV rows, plots and ``--publish`` copies through it, so a
run changes nothing tracked unless asked, and docs/figures/ gets only the names the READMEs use.
The rules are read from the source (ast): outside bench/common.py no module defines, or takes from
elsewhere, ``RESULTS``, ``FIGURES``, ``PUBLISHED``, ``publish``, ``write_rows``, ``read_rows`` or
``save_figure``; none calls ``.savefig(``, uses the csv module's readers or writers, or builds a path
into docs/figures.  Each rule is also shown failing on a planted line.
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path

import pytest

from bench import common

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "bench" / "common.py"
SOURCES = sorted([*(ROOT / "bench").glob("*.py"), *(ROOT / "examples").glob("*.py")])
OWNED = {"RESULTS", "FIGURES", "PUBLISHED", "publish", "write_rows", "read_rows", "save_figure"}
CSV_IO = {"writer", "DictWriter", "reader", "DictReader"}
FIGURE_PARTS = {"docs", "figures", "docs/figures"}


def _is_library(node: ast.ImportFrom) -> bool:
    return node.module == "bench.common" or (node.level == 1 and node.module == "common")


def _figures_path(node: ast.AST) -> bool:
    """``... / "docs" / "figures"`` or ``Path("docs/figures/...")``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return any(isinstance(side, ast.Constant) and side.value in FIGURE_PARTS for side in (node.left, node.right))
    if isinstance(node, ast.Call) and node.args:
        first = node.args[0]
        return isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith(
            "docs/figures")
    return False


def violations(source: str) -> list[str]:
    """What a bench or example does that only bench/common.py may do, one line each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in OWNED:
            found.append(f"{where}: defines {node.name}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [f"{where}: assigns {t.id}" for t in targets if isinstance(t, ast.Name) and t.id in OWNED]
        elif isinstance(node, ast.ImportFrom) and not _is_library(node):
            found += [f"{where}: takes {a.asname or a.name} from {node.module}" for a in node.names
                      if (a.asname or a.name) in OWNED]
        elif isinstance(node, ast.Attribute) and node.attr == "savefig":
            found.append(f"{where}: calls savefig")
        elif (isinstance(node, ast.Attribute) and node.attr in CSV_IO and isinstance(node.value, ast.Name)
              and node.value.id == "csv"):
            found.append(f"{where}: csv.{node.attr}")
        elif _figures_path(node):
            found.append(f"{where}: a path into docs/figures")
    return found


@pytest.mark.parametrize("path", [p for p in SOURCES if p != LIBRARY], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_results_and_figures_go_through_the_library(path):
    assert violations(path.read_text()) == []


@pytest.mark.parametrize("planted", [
    "RESULTS = Path('bench/results')",
    "def publish(png, to_docs):\n    pass",
    "def write_rows(path, rows):\n    pass",
    "class save_figure:\n    pass",
    "from bench.bench_allreduce import save_figure",
    "from bench.figures import publish as publish",
    "fig.savefig('x.png')",
    "w = csv.DictWriter(f, fields)",
    "rows = list(csv.DictReader(f))",
    "(ROOT / 'docs' / 'figures' / 'x.png').write_bytes(b'')",
    "shutil.copy(png, Path('docs/figures/x.png'))",
])
def test_each_rule_catches_its_line(planted):
    assert violations(planted)
    assert violations("from bench.common import RESULTS, publish, save_figure, write_rows\n"
                      "publish(save_figure(fig, RESULTS / 'x.png'), False)") == []


def test_rows_round_floats_and_read_back(tmp_path):
    path = common.write_rows(tmp_path / "sub" / "rows.csv", [{"a": 1, "b": 0.123456}, {"a": 2, "b": "x"}])
    assert common.read_rows(path) == [{"a": "1", "b": "0.1235"}, {"a": "2", "b": "x"}]
    exact = common.write_rows(tmp_path / "exact.csv", [{"b": 0.123456, "c": 1}], ["c", "b"], digits=None)
    with exact.open() as f:
        assert list(csv.reader(f)) == [["c", "b"], ["1", "0.123456"]]
    common.write_rows(tmp_path / "none.csv", [])  # an interrupted run without rows writes nothing
    assert not (tmp_path / "none.csv").exists()


def test_publish_copies_only_published_names_and_only_when_asked(tmp_path):
    png = tmp_path / "allreduce.png"
    png.write_bytes(b"png")
    docs = tmp_path / "docs"
    assert common.publish(png, False, figures=docs) is None and not docs.exists()
    assert common.publish(png, True, figures=docs) == docs / "allreduce-ina-vs-ring.png"
    assert (docs / "allreduce-ina-vs-ring.png").read_bytes() == b"png"
    stray = tmp_path / "mine.png"
    stray.write_bytes(b"png")
    with pytest.raises(ValueError, match="mine.png: not a published plot"):
        common.publish(stray, True, figures=docs)
