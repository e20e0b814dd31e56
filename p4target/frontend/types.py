"""P4 types after name resolution: what the checker computes and backends consume."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Type:
    """Base of all P4 types."""


@dataclass(frozen=True, slots=True)
class BitsT(Type):
    """``bit<W>`` (unsigned) or ``int<W>`` (two's complement).  ``newtype`` is the ``type``
    declaration (``type bit<16> T;``) a value was declared with: values still compare as
    their underlying type, but P4Runtime names the type (p4c's ``type_name``)."""

    width: int
    signed: bool = False
    newtype: Any = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass(frozen=True, slots=True)
class _Named(Type):
    name: str

    def __str__(self) -> str:
        return self.name


BOOL = _Named("bool")
INFINT = _Named("int")  # arbitrary-precision integer (unsized literals, const int)
ERROR = _Named("error")
STRING = _Named("string")
VOID = _Named("void")
MATCH_KIND = _Named("match_kind")
DONTCARE = _Named("_")


@dataclass(eq=False, slots=True)
class EnumT(Type):
    name: str
    members: list[str]
    underlying: BitsT | None = None  # serializable enums only
    values: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name

    def code(self, member: str) -> int:
        return self.values[member] if self.underlying else self.members.index(member)


@dataclass(eq=False, slots=True)
class HeaderT(Type):
    """A header or a struct: ordered fields.  One object per declaration."""

    name: str
    kind: str  # header | struct
    fields: dict[str, Type] = field(default_factory=dict)
    decl: Any = None

    def __str__(self) -> str:
        return self.name

    @property
    def is_header(self) -> bool:
        return self.kind == "header"

    @property
    def is_union(self) -> bool:
        return self.kind == "header_union"

    @property
    def varbit_field(self) -> str | None:
        """The name of the header's varbit field (at most one), if any."""
        return next((n for n, t in self.fields.items() if isinstance(t, VarbitT)), None)

    @property
    def width(self) -> int:
        """Bits on the wire (headers only); a varbit field counts as 0 (minSizeInBits)."""
        return sum(bit_width(t) for t in wire_fields(self) if not isinstance(t, VarbitT))


@dataclass(frozen=True, slots=True)
class VarbitT(Type):
    """``varbit<N>``: a header field whose length (a whole number of bytes, at most N
    bits) is fixed by ``extract``; its value is held as the extracted bytes."""

    max_width: int

    def __str__(self) -> str:
        return f"varbit<{self.max_width}>"


@dataclass(frozen=True, slots=True)
class StackT(Type):
    elem: Type  # a header or a header_union (any type in the frontend: is_header_stack)
    size: int

    def __str__(self) -> str:
        return f"{self.elem}[{self.size}]"


@dataclass(eq=False, slots=True)
class TupleT(HeaderT):
    """``tuple<T0, T1, ...>`` (and the type of a list expression ``{a, b}``): stored, copied,
    passed and initialised like a struct whose fields are ``f0``, ``f1``, ... in order, as
    p4c's EliminateTuples rewrites tuples for BMv2.  Unlike a struct, two tuple types with
    the same element types are the same type."""

    elems: tuple[Type, ...] = ()

    @classmethod
    def of(cls, elems: tuple[Type, ...] | list[Type]) -> TupleT:
        elems = tuple(elems)
        name = "tuple<" + ", ".join(map(str, elems)) + ">"
        return cls(name, "struct", {f"f{i}": t for i, t in enumerate(elems)}, None, elems)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TupleT) and self.elems == other.elems

    def __hash__(self) -> int:
        return hash(self.elems)


@dataclass(frozen=True, slots=True)
class ListT(Type):
    """``list<T>`` (P4-16 1.2.4): a compile-time list of values, e.g. an extern's constructor
    argument; the frontend checks it, the built-in target runs none (decls.resolve_type)."""

    elem: Type

    def __str__(self) -> str:
        return f"list<{self.elem}>"


@dataclass(frozen=True, slots=True)
class TypeVar(Type):
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class ExternT(Type):
    """An extern object type, with its type arguments bound (``register<bit<32>>``)."""

    decl: Any
    args: tuple[Type, ...] = ()

    def __str__(self) -> str:
        args = "<" + ", ".join(map(str, self.args)) + ">" if self.args else ""
        return f"{self.decl.name}{args}"


@dataclass(frozen=True, slots=True)
class BlockT(Type):
    """A parser or control (declaration or type), or a package."""

    decl: Any

    def __str__(self) -> str:
        return self.decl.name


@dataclass(frozen=True, slots=True)
class TableT(Type):
    decl: Any

    def __str__(self) -> str:
        return f"table {self.decl.name}"


@dataclass(frozen=True, slots=True)
class ApplyResultT(Type):
    """What ``t.apply()`` returns: ``.hit``, ``.miss``, ``.action_run``."""

    table: Any

    def __str__(self) -> str:
        return f"{self.table.name}.apply() result"


@dataclass(frozen=True, slots=True)
class ActionRunT(Type):
    table: Any

    def __str__(self) -> str:
        return f"{self.table.name}.action_run"


def wire_fields(t: HeaderT) -> list[Type]:
    """A header's (or struct's) fields as they go on the wire: a struct-typed field is its own
    fields, recursively, in declaration order (p4c's midend FlattenHeaders).  These are also the
    executor's slots after a header's valid bit, one each."""
    out: list[Type] = []
    for ft in t.fields.values():
        if isinstance(ft, HeaderT) and ft.kind == "struct":
            out += wire_fields(ft)
        else:
            out.append(ft)
    return out


def is_bits_struct(t: Type) -> bool:
    """A struct whose fields are bit<W>, int<W>, bool, serializable enums or such structs: the
    structs p4c allows as a header field (its type checker's onlyBitsOrBitStructs)."""
    if not (isinstance(t, HeaderT) and t.kind == "struct" and not isinstance(t, TupleT)):
        return False
    return all(isinstance(f, BitsT) or f is BOOL or isinstance(f, EnumT) and f.underlying is not None
               or is_bits_struct(f) for f in t.fields.values())


def bit_width(t: Type) -> int:
    """Width on the wire of a header field / hash input / table key type."""
    if isinstance(t, BitsT):
        return t.width
    if t is BOOL:
        return 1
    if isinstance(t, EnumT):  # p4c's BMv2 midend gives a plain enum 32 bits
        return t.underlying.width if t.underlying is not None else 32
    if isinstance(t, HeaderT) and t.is_header and t.varbit_field is None:
        return t.width
    if is_bits_struct(t):  # a struct field of a header: its fields side by side
        return sum(bit_width(f) for f in wire_fields(t))
    raise TypeError(f"{t} has no fixed width")


def is_header_stack(elem: Type) -> bool:
    """Whether an array of ``elem`` is a header stack (P4-16 1.2.4 also allows other arrays)."""
    return isinstance(elem, HeaderT) and (elem.is_header or elem.is_union)


def is_numeric(t: Type) -> bool:
    return isinstance(t, BitsT) or t is INFINT


def wrap(value: int, t: Type) -> int:
    """Reduce an integer to the range of a fixed-width type (modulo 2^W)."""
    if isinstance(t, BitsT):
        value &= t.mask
        if t.signed and value >> (t.width - 1):
            value -= 1 << t.width
    return value


def fold_arith(op: str, a: int, b: int, t: Type) -> int:
    """Constant arithmetic with the result type's wrap/saturate rules."""
    if op in ("|+|", "|-|"):
        raw = a + b if op == "|+|" else a - b
        assert isinstance(t, BitsT)
        lo, hi = (-(1 << (t.width - 1)), (1 << (t.width - 1)) - 1) if t.signed else (0, t.mask)
        return min(max(raw, lo), hi)
    raw = {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a // b,
        "%": lambda: a % b, "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b,
    }[op]()
    return wrap(raw, t)
