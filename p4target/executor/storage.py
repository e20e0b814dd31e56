"""Where values live in the executor's flat state list ``S``: slot layouts of P4 types.

Shared by ``codegen`` and the other code generation passes and helper modules (headers, calls, sub-parsers,
v1model and TNA code generation); kept below all of them so none imports ``codegen``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..frontend.types import HeaderT, StackT, Type
from . import ir


@dataclass(frozen=True, slots=True)
class DynBase:
    """A slot number computed at run time: ``expr`` plus ``offset``.  It adds to ints, so a
    member's base is ``st.base + k`` whether the base is known or not; ``ir.lift`` makes it a node."""

    expr: ir.Expr
    offset: int = 0

    def as_expr(self) -> ir.Expr:
        return ir.Bin("+", self.expr, ir.Const(self.offset)) if self.offset else self.expr

    def __add__(self, k: int) -> DynBase:
        return DynBase(self.expr, self.offset + k)

    __radd__ = __add__


@dataclass(frozen=True, slots=True)
class Storage:
    """Where a value of type ``type`` lives in the state list: slots base .. base+size.
    ``base`` is a DynBase for elements reached through a run-time stack index; a header
    in a union lists its siblings' valid slots (relative to ``base``) in ``siblings``."""

    base: int | DynBase
    type: Type
    siblings: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        return slot_count(self.type)


_SLOTS: dict[int, tuple[Type, int]] = {}  # id(type): (the type, its slot count): types are shared and unchanged
_OFFSETS: dict[int, tuple[Type, dict[str, int]]] = {}  # id(struct or header type): (it, its fields' offsets)


def slot_count(t: Type) -> int:
    """How many slots a value of type ``t`` takes (a header's valid bit and a stack's next index count)."""
    if not isinstance(t, HeaderT | StackT):
        return 1
    known = _SLOTS.get(id(t))
    if known is not None and known[0] is t:
        return known[1]
    count = _slot_count(t)
    _SLOTS[id(t)] = (t, count)
    return count


def _slot_count(t: Type) -> int:
    if isinstance(t, HeaderT):
        own = sum(slot_count(f) for f in t.fields.values())
        return own + 1 if t.is_header else own
    if isinstance(t, StackT):
        return t.size * slot_count(t.elem) + 1  # the elements, then the next index
    return 1


def member_storage(st: Storage, name: str) -> Storage:
    """The slots of field ``name`` of the struct, header or union stored at ``st``."""
    t = st.type
    assert isinstance(t, HeaderT)
    known = _OFFSETS.get(id(t))
    if known is not None and known[0] is t:
        offsets = known[1]
    else:
        offset = 1 if t.is_header else 0
        offsets = {}
        for fname, ft in t.fields.items():
            offsets[fname] = offset
            offset += slot_count(ft)
        _OFFSETS[id(t)] = (t, offsets)
    if name not in offsets:
        raise KeyError(name)
    own = offsets[name]
    siblings = tuple(o - own for n, o in offsets.items() if n != name) if t.is_union else ()
    return Storage(st.base + own, t.fields[name], siblings)


class Scope(dict):
    """decl -> binding for one control/parser instance: Storage, an ir node (read-only values such as
    action data), a qualified name, or a runtime object's name.
    Inner scopes are copies, so bindings never leak outwards."""
