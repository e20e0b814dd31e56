"""The executor's program representation: what code generation produces, once, for both backends.

``codegen.CodeGen`` knows P4's semantics and writes them down here as a small tree of typed
nodes.  Two printers read the tree: ``python.py`` prints it as the Python module the switch
executes (the reference), and ``native/lower.py`` prints it as C.  Neither parses text.

The model is deliberately plain.  A packet's whole state is one flat list ``S`` of slots
(``storage.py`` lays P4 types out in it); every value a node computes is an integer (bool is 0
or 1) unless the node says otherwise (``Bytes`` results, a table entry, a tuple).

* **Functions** have a ``Kind``, which fixes their parameters: a parser ``(S, data)`` returns
  ``(pos, error)``; a control ``(S)``; a deparser ``(S, OUT)``; a table's apply ``(S)`` returns
  ``(hit, action name)``; an action ``(S, a0, a1, ...)`` takes its action data.
* **Locals** are ``Var`` with a ``VarKind``: an integer, a table entry, or a row of slots.
* **Expressions** are arithmetic on integers (``Bin``, ``Cmp``, ``Not`` ...), slot reads
  (``Slot``, ``Slots``), reads of the packet (``PacketInt``, ``Unpack``), and the runtime
  objects' operations (``TableLookup``, ``RegCell``, ``VsetMatches`` ...), each naming its object
  with ``Obj``.  Arithmetic is exact (Python integers): code generation masks to a width
  explicitly, so a backend with wider integers than any width gets the same results.
* **Statements** are assignment, ``If``, the loops, ``TryExit`` (P4 ``exit`` unwinds to it) and
  the runtime objects' effects (``Emit``, ``RunAction``).

What only the Python executor supports (varbit, clone state, digests, meters, action profiles)
is written with the generic nodes ``Attr``, ``Item`` and ``MethodCall``; the C printer refuses
those by name and the switch runs that program in Python.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Kind(enum.Enum):
    """What a generated function is, which fixes its parameters and what it returns."""

    PARSER = "parser"  # (S, data) -> (pos, error)
    CONTROL = "control"  # (S)
    DEPARSER = "deparser"  # (S, OUT)
    APPLY = "apply"  # a table's apply: (S) -> (hit, action name)
    ACTION = "action"  # a table's action: (S, a0, a1, ...)


class Exc(enum.Enum):
    """What a ``Raise`` raises: P4 ``exit`` (unwinds to the ``TryExit``), or a reason the packet is
    dropped.  ``exceptions.CLASS`` gives each kind's Python class; the C lowering its drop reason."""

    EXIT = "exit"  # P4 exit
    LOOP_LIMIT = "loop limit"  # a for loop ran loops.LOOP_LIMIT iterations
    ASSERTION = "assertion"  # a v1model assert/assume failed
    REGISTER_CONFLICT = "register conflict"  # TNA: a second RegisterAction on one Register


class VarKind(enum.Enum):
    VALUE = "value"  # an integer
    ENTRY = "entry"  # a table entry (TableLookup, DefaultEntry); None when the lookup missed
    ROW = "row"  # a copy of a row of slots (Slots)
    ANY = "any"  # a Python value only the Python executor runs with (tuples, byte strings)


class Expr:
    """An expression node (``python.expr`` prints one as Python)."""

    __slots__ = ()


def lift(x: Any) -> Expr:
    """A node for ``x``: constants become ``Const``, nodes stay, a run-time slot number
    (``storage.DynBase``) gives its expression."""
    if isinstance(x, Expr):
        return x
    if x is None or isinstance(x, (int, bool, bytes)):
        return Const(x)
    if hasattr(x, "as_expr"):
        return x.as_expr()
    raise TypeError(f"not an expression: {x!r}")


def slot(k: Any) -> Slot:
    """``S[k]``; k an int, a DynBase or a node."""
    return Slot(lift(k))


def slots(lo: Any, n: int) -> Slots:
    return Slots(lift(lo), n)


def bin_(op: str, a: Any, b: Any) -> Bin:
    return Bin(op, lift(a), lift(b))


def cmp(op: str, a: Any, b: Any) -> Cmp:
    return Cmp(op, lift(a), lift(b))


# ---------------------------------------------------------------- values
@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: int | bool | bytes | str | None  # str: an action's name (ApplyAction compares to it)


@dataclass(frozen=True, slots=True)
class Var(Expr):
    name: str
    kind: VarKind = VarKind.VALUE


@dataclass(frozen=True, slots=True)
class Slot(Expr):
    """``S[index]``: one slot; the index is a constant or computed at run time."""

    index: Expr


@dataclass(frozen=True, slots=True)
class Slots(Expr):
    """``S[lo:lo + n]``: ``n`` consecutive slots (a header's fields, a stack element)."""

    lo: Expr
    n: int


@dataclass(frozen=True, slots=True)
class RowPart(Expr):
    """``row[lo:hi]``: part of a ``ROW`` local, constant bounds."""

    row: Var
    lo: int
    hi: int


@dataclass(frozen=True, slots=True)
class Obj(Expr):
    """A runtime object of the generated module's namespace (a table, register, counter, value
    set, struct packer, meter ...), by the name it is bound to there."""

    name: str
    value: Any = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PacketLength(Expr):
    """The length of the packet's bytes (``L`` in a parser)."""


# ---------------------------------------------------------------- arithmetic
BIN_OPS = ("+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>")
CMP_OPS = ("==", "!=", "<", ">", "<=", ">=")


@dataclass(frozen=True, slots=True)
class Bin(Expr):
    op: str  # one of BIN_OPS; // and % of non-negative integers
    a: Expr
    b: Expr


@dataclass(frozen=True, slots=True)
class Cmp(Expr):
    op: str  # one of CMP_OPS
    a: Expr
    b: Expr


@dataclass(frozen=True, slots=True)
class Not(Expr):
    a: Expr


@dataclass(frozen=True, slots=True)
class Neg(Expr):
    a: Expr


@dataclass(frozen=True, slots=True)
class Invert(Expr):
    a: Expr


@dataclass(frozen=True, slots=True)
class And(Expr):
    """Short-circuit ``and`` of its items (each 0/1 or bool)."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Select(Expr):
    """``then if cond else other``: only the chosen side is evaluated."""

    cond: Expr
    then: Expr
    other: Expr


BUILTINS = {
    # name: arity; pure functions of integers (and byte strings where said)
    "min": 2, "max": 2,
    "bool": 1,  # 0/1 of a number
    "stack_index": 2,  # (index, size): the index, or the packet is dropped when it is out of range
    "csum16": 1,  # ones' complement checksum of a byte string
    "csum_add": 2, "csum_sub": 2,  # (accumulator, byte string)
    "hash_offset": 4,  # (Hash, bytes, base, max)
    "pack_bits": 2,  # (Tuple of values, Tuple of widths): the big-endian bit string; a None value is skipped
    "int_of_bytes": 1,  # a byte string as a big-endian number
}


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """One of ``BUILTINS``."""

    fn: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Hash(Expr):
    """A hash function of ``algorithms.HASHES`` by name (an argument of hash_offset), or applied
    to a byte string when ``data`` is given."""

    algo: str
    data: Expr | None = None


@dataclass(frozen=True, slots=True)
class Tuple(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Concat(Expr):
    """Two byte strings joined."""

    a: Expr
    b: Expr


@dataclass(frozen=True, slots=True)
class Payload(Expr):
    """The bytes after the parsed headers (v1model's ``*_with_payload`` checksums)."""


@dataclass(frozen=True, slots=True)
class IngressLength(Expr):
    """The packet's length as it entered ingress (meters that count bytes)."""


# ---------------------------------------------------------------- the packet
@dataclass(frozen=True, slots=True)
class PacketInt(Expr):
    """The ``n`` bytes of the packet at ``pos`` as a big-endian number (a parser reads them)."""

    pos: Expr
    n: Expr


@dataclass(frozen=True, slots=True)
class Unpack(Expr):
    """The fields a ``struct.Struct`` reads from the packet at ``pos`` (a header of whole-byte
    fields); as many values as the struct has fields, assigned to ``Slots``."""

    struct: Obj
    pos: Expr


@dataclass(frozen=True, slots=True)
class Pack(Expr):
    """The bytes a ``struct.Struct`` makes of ``Slots``: a deparsed header of whole-byte fields."""

    struct: Obj
    slots: Slots


@dataclass(frozen=True, slots=True)
class ToBytes(Expr):
    """``value`` as ``n`` big-endian bytes."""

    value: Expr
    n: Expr


# ---------------------------------------------------------------- tables and externs
@dataclass(frozen=True, slots=True)
class TableLookup(Expr):
    """The entry of ``table`` matching ``keys``, or None (an ``ENTRY`` value)."""

    table: Obj
    keys: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class DefaultEntry(Expr):
    table: Obj


@dataclass(frozen=True, slots=True)
class EntryAction(Expr):
    """The name of the action an entry runs."""

    entry: Var


@dataclass(frozen=True, slots=True)
class IsNone(Expr):
    """An ``ENTRY`` that is None: the lookup missed (Python only: a slot not set yet, v1model's
    truncate length)."""

    entry: Expr


@dataclass(frozen=True, slots=True)
class Apply(Expr):
    """Run a table's apply function: (hit, action name); ``ApplyHit``/``ApplyAction`` read it."""

    fn: str


@dataclass(frozen=True, slots=True)
class ApplyHit(Expr):
    result: Expr


@dataclass(frozen=True, slots=True)
class ApplyAction(Expr):
    result: Expr


@dataclass(frozen=True, slots=True)
class RegCell(Expr):
    """A register's cell (a tuple of field values for a struct register); an l-value."""

    reg: Obj
    index: Expr


@dataclass(frozen=True, slots=True)
class CounterCell(Expr):
    """An indexed counter's packets or bytes; an l-value of ``AugAssign``."""

    counter: Obj
    which: str  # "packets" | "bytes"
    index: Expr


@dataclass(frozen=True, slots=True)
class EntryCount(Expr):
    """A table entry's direct counter, packets (0) or bytes (1); an l-value of ``AugAssign``."""

    entry: Var
    which: int


@dataclass(frozen=True, slots=True)
class VsetMatches(Expr):
    vset: Obj
    keys: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class SlotsTuple(Expr):
    """The values of ``Slots`` as one tuple (a struct register's cell is written from it)."""

    slots: Slots


# ---------------------------------------------------------------- Python only
@dataclass(frozen=True, slots=True)
class Name(Expr):
    """A name of the generated module's namespace other than a runtime object (``RT``, ``PAYLOAD``)."""

    name: str


@dataclass(frozen=True, slots=True)
class Attr(Expr):
    base: Expr
    name: str


@dataclass(frozen=True, slots=True)
class Item(Expr):
    """``base[index]``; with ``hi``, ``base[index:hi]``."""

    base: Expr
    index: Expr
    hi: Expr | None = None


@dataclass(frozen=True, slots=True)
class MethodCall(Expr):
    """``fn(*args)``, ``fn`` an Attr or Name; ``star``: the last argument is unpacked."""

    fn: Expr
    args: tuple[Expr, ...]
    star: bool = False


# ================================================================ statements
class Stmt:
    __slots__ = ()


@dataclass(slots=True)
class Assign(Stmt):
    """``target = value``; target a Slot, Slots, Var, RegCell or Item.  ``Slots`` take a value
    of as many items (Slots, Unpack, a Tuple, a struct RegCell); a ``ROW`` Var takes Slots."""

    target: Expr
    value: Expr


@dataclass(slots=True)
class AugAssign(Stmt):
    target: Expr
    op: str  # one of BIN_OPS
    value: Expr


@dataclass(slots=True)
class If(Stmt):
    cond: Expr
    then: list[Stmt] = field(default_factory=list)
    other: list[Stmt] = field(default_factory=list)


@dataclass(slots=True)
class Loop(Stmt):
    """``while True``: left by Break (or Return, Raise)."""

    body: list[Stmt] = field(default_factory=list)


@dataclass(slots=True)
class ForRange(Stmt):
    """``for var in range(lo, hi)``, the bounds evaluated once."""

    var: Var
    lo: Expr
    hi: Expr
    body: list[Stmt] = field(default_factory=list)


@dataclass(slots=True)
class Break(Stmt):
    pass


@dataclass(slots=True)
class Continue(Stmt):
    pass


@dataclass(slots=True)
class Pass(Stmt):
    pass


@dataclass(slots=True)
class Return(Stmt):
    """A parser returns Tuple(pos, error), a table apply Tuple(hit, action name), others nothing."""

    value: Expr | None = None


@dataclass(slots=True)
class Raise(Stmt):
    """``exc`` is ``Exc.EXIT`` (P4 ``exit``) or a kind that drops the packet, with an optional
    message; None re-raises the exception being handled (inside TryExit's handler)."""

    exc: Exc | None
    message: str | None = None


@dataclass(slots=True)
class TryExit(Stmt):
    """Run ``body``; a P4 ``exit`` inside it (``Raise(Exc.EXIT)``) runs ``handler`` instead of the rest."""

    body: list[Stmt] = field(default_factory=list)
    handler: list[Stmt] = field(default_factory=list)


@dataclass(slots=True)
class Do(Stmt):
    """An expression for its effect: an Apply, or (Python only) a MethodCall."""

    value: Expr


@dataclass(slots=True)
class Emit(Stmt):
    """A deparser appends bytes (Pack or ToBytes) to its output."""

    value: Expr


@dataclass(slots=True)
class RunAction(Stmt):
    """Run the action of a table entry with its action data."""

    entry: Var


@dataclass(slots=True)
class Comment(Stmt):
    text: str


# ================================================================ functions
PARAMS = {Kind.PARSER: ("S", "data"), Kind.CONTROL: ("S",), Kind.DEPARSER: ("S", "OUT"), Kind.APPLY: ("S",),
          Kind.ACTION: ("S",)}


@dataclass(slots=True)
class Function:
    """One generated function; an action's ``data`` are its action data parameters, in order."""

    name: str
    kind: Kind
    body: list[Stmt] = field(default_factory=list)
    data: tuple[Var, ...] = ()

    @property
    def params(self) -> tuple[str, ...]:
        return PARAMS[self.kind] + tuple(v.name for v in self.data)


class Unset(int):
    """A slot's initial value that reads as 0 but is told from a written 0: TNA's
    ``ig_tm_md.ucast_egress_port`` before ingress writes it (an unwritten field is not sent to
    the traffic manager).  One object, told by identity: a copy (``Generated.copy``) or a pickle
    is that object.  Only copies of slots carry it; any arithmetic makes it 0."""

    def __reduce__(self) -> str:
        return "UNSET"


UNSET = Unset(0)


@dataclass(slots=True)
class Module:
    """A program's generated functions (table actions first, then applies, then the blocks) and
    the initial value of every slot (ints, bools, UNSET; b"" for varbit fields and Python-only state)."""

    functions: list[Function] = field(default_factory=list)
    template: list[Any] = field(default_factory=list)
