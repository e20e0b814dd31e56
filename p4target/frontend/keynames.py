"""p4c's TableKeyNames: the control-plane name of a table key (its @name, else the key
expression printed as p4c prints it).  A key p4c cannot name without @name is refused; the
checker runs this on every key (a late frontend stage) and P4Info uses the names."""

from __future__ import annotations

import re
from pathlib import Path

from . import ast
from .errors import P4Error
from .types import HeaderT

_INT_TOKEN = re.compile(r"[0-9][0-9a-zA-Z_]*")


def key_name(key: ast.KeyElement) -> str:
    """The match field name: the key's @name, else p4c's rendering of the expression."""
    ann = ast.find_annotation(key.annotations, "name")
    return ann.args[0].text if ann else _key_name(key.expr)


def _key_name(e: ast.Expr) -> str:
    """p4c's TableKeyNames: the key expression printed, e.g. ``hdr.ipv4.$valid$`` or ``x[7:0]``."""
    if isinstance(e, ast.PathExpr):
        return e.name
    if isinstance(e, ast.Member):
        t = e.base.type
        fields = t.decl.fields if isinstance(t, HeaderT) and t.decl is not None else []
        field = next((f for f in fields if f.name == e.member), None)
        ann = None if field is None else ast.find_annotation(field.annotations, "name")
        if ann and ann.args and isinstance(ann.args[0], ast.StringLit):  # a struct field's @name
            text = ann.args[0].text
            return text[1:] if text.startswith(".") else f"{_key_name(e.base)}.{text}"
        return f"{_key_name(e.base)}.{e.member}"
    if isinstance(e, ast.Index):
        return f"{_key_name(e.base)}[{literal_text(e.index)}]"
    if isinstance(e, ast.Slice):
        e = e.written or e  # a nested slice, as written
        return f"{_key_name(e.base)}[{literal_text(e.hi)}:{literal_text(e.lo)}]"
    if isinstance(e, ast.Call) and e.target is not None and e.target.kind == "header_method":
        return f"{_key_name(e.target.instance)}.$valid$"
    if isinstance(e, ast.Binary) and e.op == "&":
        return f"{_key_name(e.left)} & {_key_name(e.right)}"
    if isinstance(e, ast.IntLit):
        return literal_text(e)
    raise P4Error(e.loc, f"{ast.text(e)}: Complex key expression requires a @name annotation")


def literal_text(e: ast.Expr) -> str:
    """A constant as written in the source: p4c prints constants in their source base."""
    if isinstance(e, ast.IntLit):
        try:
            line = Path(e.loc.file).read_text().splitlines()[e.loc.line - 1]
            if m := _INT_TOKEN.match(line, e.loc.col - 1):
                return m.group()
        except (OSError, IndexError):
            pass
    return str(e.value)
