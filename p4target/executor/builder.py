"""How code generation writes statements: into the current block, nested blocks opened with ``with``.

``CodeGen`` and its helper modules call ``emit(stmt)`` and open blocks with ``if_``, ``elif_``,
``else_``, ``loop``, ``for_range``, ``try_exit``/``on_exit`` and ``define`` (a function); the builder keeps
the tree (``ir.Module``).  ``else_`` and ``elif_`` continue the ``If`` just emitted in the
current block, at the end of its elif chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from . import ir, python


class Builder:
    """Statements written so far: the module's functions, and the block being written."""

    def __init__(self) -> None:
        self.lines: list[str] = []  # text mode (the conversion's last step removes it)
        self.indent = 0
        self.texts: dict[str, str] = {}

    # ------------------------------------------------------------ statements
    def emit(self, s: ir.Stmt | str) -> None:
        if isinstance(s, str):
            self.lines.append("    " * self.indent + s)
        else:
            self.lines += python.stmt(s, self.indent)

    @contextmanager
    def _nested(self, head: str) -> Iterator[None]:
        self.lines.append("    " * self.indent + head)
        self.indent += 1
        mark = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == mark:
                self.lines.append("    " * self.indent + "pass")
            self.indent -= 1

    def if_(self, cond: ir.Expr | str):
        return self._nested(f"if {cond}:")

    def elif_(self, cond: ir.Expr | str):
        return self._nested(f"elif {cond}:")

    def else_(self):
        return self._nested("else:")

    def loop(self):
        return self._nested("while True:")

    def for_range(self, var: ir.Var, lo: ir.Expr, hi: ir.Expr):
        return self._nested(f"for {var.name} in range({lo}, {hi}):")

    def try_exit(self):
        return self._nested("try:")

    def on_exit(self):
        """The handler of the ``try_exit`` just closed: what a P4 ``exit`` inside it runs."""
        return self._nested("except ExitBlock:")

    @contextmanager
    def define(self, name: str, kind: ir.Kind, data: tuple[ir.Var, ...] = ()) -> Iterator[None]:
        """A function of the module, written apart from the one being written (if any)."""
        fn = ir.Function(name, kind, [], data)
        saved = self.lines, self.indent
        self.lines, self.indent = [], 0
        with self._nested(f"def {name}({', '.join(fn.params)}):"):
            yield
        self.texts[name] = "\n".join(self.lines) + "\n\n"
        self.lines, self.indent = saved

    def function_source(self, name: str) -> str:
        return self.texts[name]

    def module_source(self) -> str:
        return "".join(self.texts.values())
