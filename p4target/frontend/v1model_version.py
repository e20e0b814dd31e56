"""p4c's GetV1ModelVersion on ``const bit<32> __v1model_version`` (v1model.p4): the version a
program asks for with ``#define V1MODEL_VERSION`` must be a non-negative number that p4c
knows.  p4test runs it when it pretty-prints the program (``--pp``, the second pass of its
FrontEnd), so it is judged before any other semantic rule, on the initializer as written."""

from __future__ import annotations

from . import ast
from .errors import P4Error

INITIAL_VERSION, CURRENT_VERSION = 20180101, 20200408  # p4c's V1Model::versionInitial, versionCurrent


def check_v1model_version(program: ast.Program) -> None:
    for decl in program.decls:
        if not (isinstance(decl, ast.ConstDecl) and decl.name == "__v1model_version"):
            continue
        init = decl.init
        if not isinstance(init, ast.IntLit) or init.number < 0:
            raise P4Error(init.loc, f"{ast.text(init)}: expected v1model version to be a non-negative number")
        if not INITIAL_VERSION <= init.number <= CURRENT_VERSION:
            raise P4Error(init.loc, f"{ast.text(init)}: unknown v1model version; initial supported version is "
                          f"{INITIAL_VERSION}, latest is {CURRENT_VERSION}")
