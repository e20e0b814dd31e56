"""p4c's CheckNamedArgs (a FrontEnd pass before its type checker), the part not checked where
calls are: only an extern's or a package's parameter may be ``@optional``, never a function's
nor a parser's or control's constructor parameter (nothing there could leave it out)."""

from __future__ import annotations

import re
from typing import Any

from . import ast
from .errors import P4Error
from .source_text import find_after
from .tna import is_optional


def check_optional_params(program: ast.Program) -> None:
    for params in _param_lists(program):
        for p in params:
            if is_optional(p):  # p4c: at the parameter's name
                raise P4Error(find_after(p.loc, rf"\b{re.escape(p.name)}\b(?=\s*[,)=])"),
                              f"{p.name}: optional parameter not allowed here")


def _param_lists(program: ast.Program) -> list[list[ast.Param]]:
    """Functions' parameters and parsers' and controls' constructor parameters, in source order."""
    out: list[list[ast.Param]] = []
    todo: list[Any] = list(program.decls)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.ParserDecl, ast.ControlDecl)):
            out.append(node.ctor_params)
            todo = list(node.locals) + todo
        elif isinstance(node, ast.FunctionDecl):
            out.append(node.proto.params)
        elif isinstance(node, ast.Instantiation):
            todo = list(node.initializer or []) + todo
    return out
