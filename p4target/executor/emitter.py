"""The part of ``codegen.CodeGen`` that its helper modules (loops, v1model, action profiles) use.

A Protocol, so those modules type their ``CodeGen`` argument without importing ``codegen``,
which imports them.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..frontend import ast
from ..frontend.program import CheckedProgram
from ..frontend.types import Type
from .generated import Generated
from .storage import Scope, Storage


class Emitter(Protocol):
    """A code generator: Python source lines being written, and the state they index."""

    prog: CheckedProgram
    template: list[Any]  # the initial state list
    lines: list[str]
    indent: int
    ns: dict[str, Any]  # the generated module's namespace
    out: Generated
    return_stmt: str  # what P4 ``return`` becomes where the code is being inlined

    def fresh(self, stem: str) -> str: ...

    def emit(self, line: str) -> None: ...

    def const(self, value: Any, stem: str = "K") -> str: ...

    def alloc(self, t: Type) -> Storage: ...

    def stmt(self, s: ast.Stmt, scope: Scope) -> None: ...

    def storage(self, e: ast.Expr, scope: Scope) -> Storage: ...

    def hash_input(self, data: ast.Expr, scope: Scope) -> str: ...

    def ex(self, e: ast.Expr, scope: Scope) -> str: ...
