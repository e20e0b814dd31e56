"""Name resolution results shared by the checker's passes: scopes and call targets.

Kept below ``checker`` so its passes (calls, instances) use them without importing it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import ast
from .errors import P4Error


@dataclass(slots=True)
class CallTarget:
    """What a call resolves to; ``kind`` selects the executor's implementation."""

    kind: str  # action | function | method | header_method | table_apply | block_apply
    name: str  # action/function/method name
    decl: Any = None  # ActionDecl, TableDecl, Instantiation, ExternFunction ...
    instance: ast.Expr | None = None  # the object a method is called on


class Scope:
    """Declarations visible in one block, chained to the enclosing blocks' scopes."""

    def __init__(self, parent: Scope | None = None, owner: Any = None) -> None:
        self.parent = parent
        self.owner = owner  # the ParserDecl/ControlDecl/ActionDecl this scope belongs to
        self.values: dict[str, Any] = {}
        self.loop_names: set[str] = set()  # declared by for loops here: p4c puts them in this scope too

    def declare(self, decl: ast.Decl) -> None:
        if decl.name in self.loop_names:
            raise P4Error(decl.loc, f"Duplicate declaration of {decl.name}")
        if decl.name in self.values and not self._shadows_block_param(decl):
            raise P4Error(decl.loc, f"'{decl.name}' is already declared in this scope")
        _no_parameter_shadowed(self, decl)
        self.values[decl.name] = decl

    def _shadows_block_param(self, decl: ast.Decl) -> bool:
        """p4c keeps a control's parameters in namespaces around its locals: a local named as one
        hides it (p4c only warns "'t' shadows 't'"); taken for a table (no storage of its own)."""
        old = self.values[decl.name]
        return isinstance(self.owner, ast.ControlDecl) and isinstance(decl, ast.TableDecl) \
            and (isinstance(old, ast.Param) or getattr(old, "ctor_param", False))

    def declare_loop_variable(self, decl: ast.Decl) -> None:
        """A for loop's variable: visible in the loop only, but declared in the enclosing block for p4c,
        which refuses two loops (or a loop and a variable) of one block declaring the same name."""
        if decl.name in self.loop_names or decl.name in self.values:
            raise P4Error(decl.loc, f"Duplicate declaration of {decl.name}")
        self.loop_names.add(decl.name)

    def lookup(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.parent
        return None

    def root(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope


def _no_parameter_shadowed(scope: Scope, decl: ast.Decl) -> None:
    """p4c's ResolveReferences (checkShadowing): a declaration other than a parameter may not
    hide an enclosing block's parameter (only a warning for anything else)."""
    if isinstance(decl, ast.Param) or scope.parent is None:
        return
    if isinstance(scope.parent.lookup(decl.name), ast.Param):
        raise P4Error(decl.loc, f"declaration of '{decl.name}' shadows a parameter '{decl.name}'")
