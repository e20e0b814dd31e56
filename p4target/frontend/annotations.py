"""p4c's rules on the bodies of the annotations it knows (ParseAnnotationBodies, the first pass
of its FrontEnd, then ValidateStringAnnotations): an unstructured annotation's body is kept as
tokens until then, and each known annotation is parsed with its own grammar, so a body that
does not fit it is a syntax error at the annotation.

``@name``, ``@deprecated`` and ``@noWarn`` hold one string (concatenations of string literals
fold into one); the other known annotations hold one expression, a key=value list or nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import ast
from .errors import P4Error

# p4c's ParseAnnotations::standardHandlers
EMPTY = {"atomic", "defaultonly", "hidden", "likely", "noSideEffects", "optional", "pure", "tableonly",
         "unlikely", "disable_optimization", "unroll", "nounroll"}
ONE_EXPRESSION = {"name", "deprecated", "noWarn", "length", "match"}
KV_LIST = {"pkginfo"}
STRING_VALUED = ("name", "deprecated", "noWarn")


def _annotations(node: Any) -> Iterator[ast.Annotation]:
    """Every annotation of the program, in source order (a node's own before its children's)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield from getattr(n, "annotations", None) or []
        for notes in (getattr(n, "property_annotations", None) or {}).values():
            yield from notes
        todo.extend(reversed(list(ast.children(n))))


def parse_annotation_bodies(program: ast.Program) -> None:
    """ParseAnnotationBodies: each known unstructured annotation's body fits its grammar."""
    for a in _annotations(program):
        if a.structured:
            continue
        if a.name in EMPTY and a.args:
            raise P4Error(a.loc, f"@{a.name} should not have any arguments")
        named = [x for x in a.args if isinstance(x, ast.NamedArg)]
        if a.name in ONE_EXPRESSION and (len(a.args) != 1 or named):
            raise P4Error(a.args[1].loc if len(a.args) > 1 else a.loc,
                          f"@{a.name}: syntax error: the annotation holds one expression")
        if a.name in KV_LIST and (not a.args or len(named) != len(a.args)):
            raise P4Error(a.loc, f"@{a.name}: syntax error: the annotation holds a list of key=value pairs")


def validate_string_annotations(program: ast.Program) -> None:
    """@name (read by p4c's early passes, which need one string) and then ValidateStringAnnotations:
    the value of @name, @deprecated and @noWarn is a string after constant folding."""
    for a in _annotations(program):
        if a.structured or a.name not in STRING_VALUED or len(a.args) != 1:
            continue
        if _not_a_string(a.args[0]):
            if a.name == "name":
                raise P4Error(a.loc, "@name: should contain a string")
            raise P4Error(a.args[0].loc, f"{ast.text(a.args[0])}: @{a.name} annotation's value must be a string")


def _not_a_string(e: Any) -> bool:
    """Whether ``e`` is surely no string once folded (a name may stand for a string constant)."""
    if isinstance(e, ast.Binary):
        return e.op != "++" or _not_a_string(e.left) or _not_a_string(e.right)
    return isinstance(e, (ast.IntLit, ast.BoolLit, ast.Unary, ast.ListExpr))
