"""p4c's rules on a ``type`` declaration (``type bit<32> N32;``, p4c's Type_Newtype).

Our checker keeps a ``type`` as its underlying ``bit<W>``/``int<W>`` tagged with the declaration
(types.BitsT.newtype: the executor and P4Runtime need no more), so values of both compare equal.
p4c treats it as a type of its own: no implicit conversion either way (an unsized constant still
takes it: p4c's substitution looks through a newtype), an explicit cast only from or to its
underlying type, and no arithmetic on it (binaryArith wants bit<W> or int operands).
"""

from __future__ import annotations

from collections.abc import Callable

from . import ast
from .errors import P4Error
from .types import INFINT, BitsT, Type

# The operators p4c's TypeInference types with binaryArith.
ARITH = ("+", "-", "*", "/", "%", "&", "|", "^", "|+|", "|-|")
RELATIONS = ("<", ">", "<=", ">=")


def newtype_of(t: Type | None) -> ast.Typedef | None:
    return t.newtype if isinstance(t, BitsT) else None


def type_name(t: Type) -> str:
    """A type as p4c prints it: a ``type`` by its name."""
    nt = newtype_of(t)
    return nt.name if nt is not None else str(t)


def same_newtype(have: Type | None, want: Type | None) -> bool:
    """Whether a value of type ``have`` (equal to ``want`` as our types compare) is also of ``want``
    for p4c: the same ``type`` declaration, or neither is one."""
    return newtype_of(have) is newtype_of(want)


def implicit(e: ast.Expr, want: Type, what: str) -> None:
    """``e`` (of a type equal to ``want`` but for a ``type``) may not be used where ``want`` is
    expected: p4c cannot cast implicitly between a ``type`` and any other type."""
    if e.type is INFINT or same_newtype(e.type, want):
        return
    raise P4Error(e.loc, f"{what}: Cannot cast implicitly type '{type_name(e.type)}' to type '{type_name(want)}'")


def arith_operands(e: ast.Binary) -> None:
    """p4c's binaryArith: each operand is a bit<W>/int<W> or an int, never a ``type``; its
    Operation_Relation: ``<`` and the like are defined on bit<W>/int<W> only."""
    if e.op in RELATIONS and (newtype_of(e.left.type) is not None or newtype_of(e.right.type) is not None):
        raise P4Error(e.loc, f"{ast.text(e)}: not defined on {type_name(e.left.type)} and {type_name(e.right.type)}")
    if e.op not in ARITH:
        return
    for x in (e.left, e.right):
        if newtype_of(x.type) is not None:
            raise P4Error(x.loc, f"{e.op}: cannot be applied to expression '{ast.text(x)}' with type "
                          f"'{type_name(x.type)}'")


def castable(src: Type, t: Type, resolve: Callable[[ast.TypeRef], Type]) -> bool | None:
    """p4c's canCastBetween when a ``type`` is involved (None: none is, the usual rules decide):
    to a ``type`` from its underlying type, from a ``type`` to its underlying type (which may be
    a ``type`` itself: ``type N32 NN32;``), an unsized constant to a ``type`` (p4c unifies it with
    the underlying type).  ``resolve``: a type reference's type (decls.resolve_type)."""
    ns, nt = newtype_of(src), newtype_of(t)
    if ns is None and nt is None:
        return None
    if ns is nt or src is INFINT:
        return True
    if nt is not None:
        under = resolve(nt.type_ref)
        if under == src and same_newtype(under, src):
            return True
    if ns is not None:
        under = resolve(ns.type_ref)
        if under == t and same_newtype(under, t):
            return True
    return False
