"""How code generation writes statements: into the current block, nested blocks opened with ``with``.

The code generation passes and helper modules call ``env.build.emit(stmt)`` (``env.GenEnv``)
and open blocks with ``if_``, ``elif_``, ``else_``, ``loop``, ``for_range``,
``try_exit``/``on_exit`` and ``define`` (a function); the builder keeps the tree (``ir.Module``).
``else_`` and ``elif_`` continue the ``If`` just emitted in the current block, at the end of its
elif chain; ``on_exit`` is the handler of the ``TryExit`` just emitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from . import ir


class Builder:
    """The module's functions written so far, and the stack of blocks being written."""

    def __init__(self) -> None:
        self.module = ir.Module()
        self.blocks: list[list[ir.Stmt]] = []

    def emit(self, s: ir.Stmt) -> None:
        if not isinstance(s, ir.Stmt):
            raise TypeError(f"not a statement: {s!r}")
        self.blocks[-1].append(s)

    @contextmanager
    def _into(self, block: list[ir.Stmt]) -> Iterator[None]:
        self.blocks.append(block)
        try:
            yield
        finally:
            self.blocks.pop()

    def if_(self, cond: ir.Expr):
        node = ir.If(cond)
        self.emit(node)
        return self._into(node.then)

    def _last_if(self) -> ir.If:
        """The end of the elif chain of the If just emitted: where an else or elif goes."""
        node = self.blocks[-1][-1] if self.blocks[-1] else None
        if not isinstance(node, ir.If):
            raise AssertionError("else without an if")
        while len(node.other) == 1 and isinstance(node.other[0], ir.If):
            node = node.other[0]
        if node.other:
            raise AssertionError("the if already has an else")
        return node

    def elif_(self, cond: ir.Expr):
        inner = ir.If(cond)
        self._last_if().other.append(inner)
        return self._into(inner.then)

    def else_(self):
        return self._into(self._last_if().other)

    def loop(self):
        node = ir.Loop()
        self.emit(node)
        return self._into(node.body)

    def for_range(self, var: ir.Var, lo: ir.Expr, hi: ir.Expr):
        node = ir.ForRange(var, lo, hi)
        self.emit(node)
        return self._into(node.body)

    def try_exit(self):
        node = ir.TryExit()
        self.emit(node)
        return self._into(node.body)

    def on_exit(self):
        """The handler of the ``try_exit`` just closed: what a P4 ``exit`` inside it runs."""
        node = self.blocks[-1][-1]
        assert isinstance(node, ir.TryExit)
        return self._into(node.handler)

    @contextmanager
    def define(self, name: str, kind: ir.Kind, data: tuple[ir.Var, ...] = ()) -> Iterator[ir.Function]:
        """A function of the module, written apart from the one being written (if any)."""
        fn = ir.Function(name, kind, [], data)
        saved, self.blocks = self.blocks, [fn.body]
        try:
            yield fn
        finally:
            self.blocks = saved
        self.module.functions.append(fn)
