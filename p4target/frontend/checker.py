"""Semantic pass: resolve names, type-check, fold constants, find the v1model pipeline.

The checker walks the AST once and annotates it in place (``Expr.type``, ``Expr.value``,
``PathExpr.decl``, ``Call.target``, declared types).  Anything outside the subset the
built-in target executes is rejected here, with its location, rather than ignored later.

``Checker`` is the front: the work is done by passes, one file each, that share the state
in a ``CheckEnv`` (env.py): decls.py (top level, types), blocks.py (parsers, controls, the
package), tables.py, stmts.py, exprs.py, calls.py (functions and arguments), externs.py,
instances.py (parser/control instances), tna.py, profiles.py (action profiles/selectors) and
divisions.py (``/`` and ``%`` as p4c judges them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import ast
from .annotations import parse_annotation_bodies, validate_string_annotations
from .blocks import PIPELINE_BLOCKS, Blocks
from .builtins import check_global_noaction
from .calls import Calls
from .control_plane import check_action_names, check_table_names
from .decls import Decls, top_level_kinds
from .divisions import Divisions, used_closure
from .env import CheckEnv
from .errors import P4Error
from .exprs import Exprs
from .externs import V1MODEL_FUNCTIONS, Externs
from .frontend_only import FrontendOnly
from .generics import self_references
from .instances import Instances
from .named_args import check_optional_params
from .profiles import Profiles
from .program import CheckedProgram, FrontendProgram
from .stmts import Stmts
from .tables import Tables
from .tna import Tna, is_tna_main
from .types import HeaderT
from .v1model_version import check_v1model_version

# imported from here by the executor (codegen.py, v1model_codegen.py) and frontend/__init__.py
__all__ = ["PIPELINE_BLOCKS", "V1MODEL_FUNCTIONS", "CheckedProgram", "Checker", "Declarations",
           "FrontendProgram", "check", "check_declarations", "check_frontend"]


def _whole_program_passes(program: ast.Program) -> None:
    """p4c's passes over the whole program before its type checker, in its order (both modes)."""
    parse_annotation_bodies(program)  # ParseAnnotationBodies, p4c's first frontend pass
    check_v1model_version(program)  # p4test's --pp, before ValidateParsedProgram
    top_level_kinds(program)
    self_references(program)  # ResolveReferences
    check_global_noaction(program)  # CreateBuiltins
    validate_string_annotations(program)
    check_optional_params(program)  # CheckNamedArgs


class Checker:
    """Creates the env and its passes (once), then checks the program with them."""

    def __init__(self, program: ast.Program, frontend: bool = False) -> None:
        self.env = env = CheckEnv(program, frontend=frontend)
        env.decls, env.blocks, env.tables, env.stmts = Decls(env), Blocks(env), Tables(env), Stmts(env)
        env.exprs, env.calls, env.externs, env.instances = Exprs(env), Calls(env), Externs(env), Instances(env)
        env.tna, env.profiles, env.divisions = Tna(env), Profiles(env), Divisions(env)

    def check(self) -> CheckedProgram:
        _whole_program_passes(self.env.program)
        mains = [d for d in self.env.program.decls if isinstance(d, ast.Instantiation) and d.name == "main"]
        if mains and mains[0].type_ref.name == "Switch":  # TNA (is_tna_main, once the type is resolved)
            self.env.arch = "tna"
        for decl in self.env.program.decls:
            self.env.decls.top_level(decl)
        if not mains:
            raise P4Error(self.env.program.loc, "the program has no 'main' package instantiation")
        if is_tna_main(mains[0]):
            result = self.env.tna.tna_program(mains[0])
        else:
            std = self.env.types.get("standard_metadata_t")
            if not isinstance(std, HeaderT):
                raise P4Error(self.env.program.loc, "standard_metadata_t is not declared (include <v1model.p4>)")
            pipeline = self.env.blocks.pipeline(mains[0])
            result = CheckedProgram(self.env.program, self.env.errors, std, pipeline, self.env.program.decls)
            check_table_names(self.env, list(pipeline.blocks.values()))
        check_action_names(self.env)
        self._raise_midend()
        return result

    def _raise_midend(self) -> None:
        used = used_closure(self.env.used)  # p4c removed an unused action, function or table before its midend
        midend = [(stage, err) for stage, err, owner in self.env.midend if owner is None or owner in used]
        if midend:
            raise min(midend, key=lambda pair: pair[0])[1]  # the earliest pass, then source order

    def check_frontend(self) -> FrontendProgram:
        """The frontend-only check (``Checker(program, frontend=True)``): no main needed, any
        architecture (frontend_only.py)."""
        _whole_program_passes(self.env.program)
        mains = [d for d in self.env.program.decls if isinstance(d, ast.Instantiation) and d.name == "main"]
        generic = FrontendOnly(self.env)
        for decl in self.env.program.decls:
            generic.prototypes(decl)
            self.env.decls.top_level(decl)
        generic.package_instances()
        generic.uninstantiated_blocks()
        check_action_names(self.env)
        self._raise_midend()
        return FrontendProgram(self.env.program, self.env.errors, self.env.program.decls, mains[0] if mains else None)


def check(program: ast.Program) -> CheckedProgram:
    return Checker(program).check()


def check_frontend(program: ast.Program) -> FrontendProgram:
    return Checker(program, frontend=True).check_frontend()


@dataclass
class Declarations:
    """The top-level constants and types of a file with no pipeline (e.g. a protocol header
    file that Python reads so the layout is written down only once)."""

    constants: dict[str, Any]
    types: dict[str, Any]


def check_declarations(program: ast.Program) -> Declarations:
    checker = Checker(program)
    for decl in program.decls:
        checker.env.decls.top_level(decl)
    constants = {d.name: d.init.value for d in program.decls if isinstance(d, ast.ConstDecl)}
    return Declarations(constants, checker.env.types)
