"""Initializers whose type comes from their context (P4-16 1.2.4): the structure-valued expression
``{ f = e, ... }``, the default value ``...`` and the invalid header ``{#}``, checked with p4c's
TypeUnification rules once ``exprs.coerce`` knows the type they initialise.

A structure-valued expression gets its items in the struct's field order, with the default values
of the fields ``...`` leaves out, so a backend reads it as the list expression ``{a, b}`` it then
equals; what the built-in target cannot run (a default it has no literal for, ``{#}``, ``...`` on
its own) is refused after the check (stages.TARGET), so p4c's errors come first.
"""

from __future__ import annotations

from typing import Any

from . import ast, stages
from .errors import P4Error
from .types import BOOL, BitsT, HeaderT, TupleT, Type


def unknown_struct(names: list[str], types: list[Type]) -> HeaderT:
    """The type of ``{ f = e, ... }`` before its context gives one (p4c's Type_UnknownStruct)."""
    return HeaderT("unknown struct", "struct", dict(zip(names, types)))


def check_names(e: ast.StructExpr) -> None:
    """p4c: a field is initialised once."""
    seen: set[str] = set()
    for name, item in zip(e.names, e.items):
        if name in seen:
            raise P4Error(item.loc, f"{name}: Duplicates declaration {name}")
        seen.add(name)


def struct_fields(env: Any, e: ast.StructExpr, t: HeaderT, what: str) -> None:
    """``{ f = e, ... }`` where a struct or header ``t`` is expected: the same field names (fewer
    with ``...``), each value of its field's type; the items are then in field order."""
    if isinstance(t, TupleT) or not isinstance(t, HeaderT) or t.is_union:
        raise P4Error(e.loc, f"{what}: expected {t}, got a structure-valued expression {ast.text(e)}")
    if len(e.names) != len(t.fields) and not e.dots:
        raise P4Error(e.loc, f"{ast.text(e)}: Number of fields {len(e.names)} in initializer different than "
                      f"number of fields in structure {len(t.fields)}: unknown struct to {t.kind} {t.name}")
    given = dict(zip(e.names, e.items))
    missing = [name for name in t.fields if name not in given]
    if missing and not e.dots:
        raise P4Error(e.loc, f"{ast.text(e)}: No initializer for field {missing[0]}")
    for name in e.names:
        if name not in t.fields:
            raise P4Error(given[name].loc, f"{ast.text(e)}: {t.kind} {t.name} has no field {name}")
    items = []
    for name, ft in t.fields.items():
        if name in given:
            env.exprs.coerce(given[name], ft, f"field '{name}' of {t.kind} {t.name}")
            items.append(given[name])
        else:
            items.append(default_value(env, e.loc, ft))
    e.written = list(zip(e.names, e.items))
    e.items, e.names, e.type = items, list(t.fields), t


def list_with_dots(env: Any, e: ast.ListExpr, t: HeaderT, what: str) -> None:
    """``{a, ...}`` where a struct, header or tuple is expected: the fields after ``a`` take their
    default values."""
    given = e.items[:-1]
    if len(given) > len(t.fields):
        raise P4Error(e.loc, f"{what}: {t} has {len(t.fields)} fields, the list has more")
    defaults = [default_value(env, e.items[-1].loc, ft) for ft in list(t.fields.values())[len(given):]]
    e.items = given + defaults


def default_value(env: Any, loc: Any, t: Type) -> ast.Expr:
    """The default value of a type (p4c's DefaultValues): a literal where the target has one."""
    if isinstance(t, BitsT):
        lit: ast.Expr = ast.IntLit(loc, 0, t.width, t.signed)
        lit.value = 0
    elif t is BOOL:
        lit = ast.BoolLit(loc, False)
        lit.value = False
    else:
        lit = ast.Dots(loc)
        target_refuses(env, lit, f"the default value of {t} ('...')")
    lit.type = t
    return lit


def parameter_default(env: Any, p: ast.Param) -> None:
    """p4c's TypeInference never unifies a parameter's default value with the parameter's type, so
    a ``...`` there keeps no type, and its DefaultValues pass finds no value for it."""
    if isinstance(p.default, ast.Dots):
        stages.defer(env, stages.DEFAULT_VALUES, P4Error(p.default.loc, "...: could not find default value"))


def operands(e: ast.Binary) -> None:
    """p4c's TypeInference: an operator has no meaning on ``...`` (its type is ANYTYPE), nor can
    it compare two structure-valued expressions no context types."""
    if isinstance(e.left, ast.Dots) or isinstance(e.right, ast.Dots):
        shown = ["ANYTYPE" if isinstance(x, ast.Dots) else str(x.type) for x in (e.left, e.right)]
        raise P4Error(e.loc, f"{ast.text(e)}: not defined on {shown[0]} and {shown[1]}")
    if isinstance(e.left, ast.StructExpr) and isinstance(e.right, ast.StructExpr):
        raise P4Error(e.loc, f"{ast.text(e)}: cannot compare structure-valued expressions with unknown types")


def is_unknown_struct(t: Type) -> bool:
    return isinstance(t, HeaderT) and t.name == "unknown struct" and t.decl is None


def target_refuses(env: Any, e: ast.Expr, what: str) -> None:
    """Checked as p4c does, but not run by the built-in target: refused after the check."""
    if not env.frontend:
        stages.defer(env, stages.TARGET, P4Error(e.loc, f"{what} is not supported by the built-in target"))
