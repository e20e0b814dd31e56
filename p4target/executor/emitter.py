"""The part of ``codegen.CodeGen`` that its helper modules (loops, v1model, action profiles) use.

A Protocol, so those modules type their ``CodeGen`` argument without importing ``codegen``,
which imports them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..frontend import ast
from ..frontend.program import CheckedProgram
from ..frontend.types import Type
from . import ir
from .generated import Generated
from .storage import Scope, Storage


class Emitter(Protocol):
    """A code generator: the representation being written, and the state it indexes."""

    prog: CheckedProgram
    template: list[Any]  # the initial state list
    ns: dict[str, Any]  # the generated module's namespace
    out: Generated
    return_stmt: ir.Stmt  # what P4 ``return`` becomes where the code is being inlined

    def fresh(self, stem: str) -> str: ...

    def emit(self, s: ir.Stmt) -> None: ...

    def if_(self, cond: ir.Expr) -> AbstractContextManager[None]: ...

    def elif_(self, cond: ir.Expr) -> AbstractContextManager[None]: ...

    def else_(self) -> AbstractContextManager[None]: ...

    def loop(self) -> AbstractContextManager[None]: ...

    def for_range(self, var: ir.Var, lo: ir.Expr, hi: ir.Expr) -> AbstractContextManager[None]: ...

    def const(self, value: Any, stem: str = "K") -> str: ...

    def alloc(self, t: Type) -> Storage: ...

    def stmt(self, s: ast.Stmt, scope: Scope) -> None: ...

    def storage(self, e: ast.Expr, scope: Scope) -> Storage: ...

    def obj(self, name: str) -> ir.Obj: ...

    def temp(self, stem: str) -> ir.Var: ...

    def hash_input(self, data: ast.Expr, scope: Scope) -> ir.Expr: ...

    def ex(self, e: ast.Expr, scope: Scope) -> ir.Expr: ...
