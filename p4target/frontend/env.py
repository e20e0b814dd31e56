"""The state the checker's passes share, in one object set up in one place.

Every pass (decls, blocks, tables, stmts, exprs, calls, externs, instances, tna, profiles,
divisions) is a class over a ``CheckEnv``: it reads and writes the fields below and reaches
the other passes through the env (``self.env.exprs.expr(e, scope)``), so what a pass
depends on is written where it is used.  The passes are created once, by ``checker.Checker``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import ast
from .errors import P4Error
from .preprocess import INCLUDE_DIR
from .scope import Scope
from .types import Type


@dataclass(eq=False)
class CheckEnv:
    """What the passes know about the program being checked (fields in the order of the passes
    that own them)."""

    program: ast.Program
    arch: str = "v1model"  # "tna" once main is a Switch
    # frontend-only mode (p4target-check --frontend): no architecture, no main needed, and the
    # built-in target's "not supported" refusals of externs/functions/methods are not made
    frontend: bool = False
    # declarations and types
    types: dict[str, Any] = field(default_factory=dict)  # type name -> Type, or generic ExternDecl/BlockTypeDecl
    globals: Scope = field(default_factory=Scope)
    errors: list[str] = field(default_factory=list)
    match_kinds: set[str] = field(default_factory=set)
    type_vars: dict[str, Type] = field(default_factory=dict)
    generic_names: set[str] = field(default_factory=set)  # the type parameters of the generic function being checked
    specialized: dict[tuple, Any] = field(default_factory=dict)  # (generic struct/header, type args) -> HeaderT
    overloads: dict[str, list[ast.ExternFunction]] = field(default_factory=dict)  # extern function name -> by arity
    # statements
    loops: int = 0  # depth of for loops around the statement being checked
    # calls (calls.py)
    fn_scopes: dict[ast.FunctionDecl, Any] = field(default_factory=dict)
    specializations: dict[tuple, ast.FunctionDecl] = field(default_factory=dict)
    pending_type_args: list[Type] | None = None  # explicit type arguments of the call being checked
    call_loc: Any = None  # where that call is
    # instances (instances.py)
    open_blocks: list[Any] = field(default_factory=list)  # parsers/controls being checked, outermost first
    block_specs: dict[tuple, Any] = field(default_factory=dict)  # (declaration, argument values) -> its copy
    direct_placed: dict[int, int] = field(default_factory=dict)  # block id -> direct-invocation instances put first
    # profiles (profiles.py): action selector id -> (first table, its selector keys)
    selector_keys: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    # divisions (divisions.py)
    known: dict[tuple, Any] = field(default_factory=dict)  # divisions.Known: what p4c's LocalCopyPropagation knows
    blurred: set[tuple] = field(default_factory=set)  # names whose value was forgotten where p4c may keep it
    owner: Any = None  # the action, function or table whose body or properties are checked
    used: set[Any] = field(default_factory=set)  # actions, functions and tables something calls or applies
    param_divisions: dict[Any, list[Any]] = field(default_factory=dict)  # owner -> divisions.ParamDivision
    key_table: ast.TableDecl | None = None  # the table whose keys are being checked
    key_divisions: dict[ast.TableDecl, list[ast.Binary]] = field(default_factory=dict)
    # Refusals of p4c's midend (BMv2's CheckUnsupported, then CompileTimeOperations): p4c
    # reports them only once the frontend found nothing, so they wait for the end of check().
    midend: list[tuple[int, P4Error, Any]] = field(default_factory=list)

    # The passes, created once by checker.Checker (after this env: they refer to it).  Typed Any:
    # each pass module imports this one, and an import back (even for typing) would be a circle.
    decls: Any = field(init=False, repr=False)  # decls.Decls
    blocks: Any = field(init=False, repr=False)  # blocks.Blocks
    tables: Any = field(init=False, repr=False)  # tables.Tables
    stmts: Any = field(init=False, repr=False)  # stmts.Stmts
    exprs: Any = field(init=False, repr=False)  # exprs.Exprs
    calls: Any = field(init=False, repr=False)  # calls.Calls
    externs: Any = field(init=False, repr=False)  # externs.Externs
    instances: Any = field(init=False, repr=False)  # instances.Instances
    tna: Any = field(init=False, repr=False)  # tna.Tna
    profiles: Any = field(init=False, repr=False)  # profiles.Profiles
    divisions: Any = field(init=False, repr=False)  # divisions.Divisions

    def target_rules(self, decl: Any) -> bool:
        """Whether the built-in target's (v1model/TNA) rules keyed by ``decl``'s name apply: always
        in target mode; in frontend mode only to our p4include's declarations, not a program's own."""
        return not self.frontend or from_p4include(decl)


def from_p4include(decl: Any) -> bool:
    """Whether ``decl`` is declared in our core.p4/v1model.p4/tna.p4 (not a program's own)."""
    return Path(decl.loc.file).resolve().parent == INCLUDE_DIR


class Pass:
    """A part of the checker with one job; the state it shares lives on ``env``."""

    def __init__(self, env: CheckEnv) -> None:
        self.env = env
