"""Headers, header unions, header stacks and varbit fields, as BMv2 simple_switch runs
what p4c-bm2-ss emits for them.

The rules followed here (behavioral-model ``headers.cpp``, ``stacks.cpp``, ``parser.cpp``,
``core/primitives.cpp`` and simple_switch's ``add_header``):

* ``setValid()`` on an invalid header sets every field to 0 first; on a valid header it
  does nothing.  ``setInvalid()`` only clears the valid bit: the fields keep their values.
* ``a = b`` of headers copies the fields and validity when ``b`` is valid; when it is not,
  ``a`` only becomes invalid (its fields keep their values).  Structs, unions and stacks
  are copied member by member that way; a stack copy also copies its next index.
* A header made valid inside a header union invalidates the union's other members.
* Stacks keep a next index (reset per packet): ``extract(s.next)`` fails with
  ``StackOutOfBounds`` when it equals the size, ``push_front``/``pop_front`` move elements
  by BMv2's sequence of swaps (the stale fields of the elements they invalidate follow it).
* A run-time stack index out of bounds makes BMv2 abort; the built-in target drops the
  packet instead (``StackIndexError``).
* A varbit field holds the extracted bytes; ``extract(h, n)`` fails with
  ``ParserInvalidArgument`` (n not a multiple of 8), ``PacketTooShort``, then
  ``HeaderTooShort`` (more than the header's maximum size), in that order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..frontend.types import BOOL, HeaderT, StackT, Type, VarbitT, bit_width, wire_fields
from . import ir
from .storage import DynBase, Storage, member_storage, slot_count

if TYPE_CHECKING:
    from .env import GenEnv


def contains_header(t: Type) -> bool:
    """Whether copying a value of type ``t`` needs header copy rules (not a plain slice)."""
    if isinstance(t, StackT):
        return True
    if isinstance(t, HeaderT):
        return not t.kind == "struct" or any(contains_header(f) for f in t.fields.values())
    return False


def shift_order(size: int, count: int, push: bool) -> tuple[list[int], list[int]]:
    """BMv2's P4-16 push_front/pop_front: which old element each position holds after
    the swaps, and the positions marked invalid."""
    order = list(range(size))
    if count == 0:
        return order, []
    if push:
        for i in range(size - 1, count - 1, -1):
            order[i], order[i - count] = order[i - count], order[i]
        return order, list(range(min(size, count)))
    i = 0
    if count < size:
        for i in range(size - count):
            order[i], order[i + count] = order[i + count], order[i]
        i = size - count
    return order, list(range(i, size))


def _zero(t: Type) -> Any:
    return False if t is BOOL else 0


class HeaderOps:
    """Code generation for validity, copies, stacks and varbit: a pass over ``env``."""

    def __init__(self, env: GenEnv) -> None:
        self.env = env

    # ------------------------------------------------------------ storage helpers
    def stack_next_slot(self, st: Storage) -> Any:
        t = st.type
        assert isinstance(t, StackT)
        return st.base + t.size * self.slots_of(t.elem)

    def slots_of(self, t: Type) -> int:
        return slot_count(t)

    def element(self, st: Storage, index: Any) -> Storage:
        """Element ``index`` (a run-time expression) of the stack at ``st``; bounds-checked."""
        t = st.type
        assert isinstance(t, StackT)
        k = self.slots_of(t.elem)
        checked = ir.Call("stack_index", (ir.lift(index), ir.Const(t.size)))
        return Storage(DynBase(ir.bin_("+", st.base, ir.bin_("*", checked, k))), t.elem)

    def stack_next(self, st: Storage) -> Storage:
        """``s.next``: the element at the next index (callers check it is in bounds)."""
        t = st.type
        k = self.slots_of(t.elem)
        return Storage(DynBase(ir.bin_("+", st.base, ir.bin_("*", ir.slot(self.stack_next_slot(st)), k))), t.elem)

    def stack_last(self, st: Storage) -> Storage:
        return self.element(st, ir.bin_("-", ir.slot(self.stack_next_slot(st)), 1))

    def last_index_code(self, st: Storage) -> ir.Expr:
        return ir.bin_("&", ir.bin_("-", ir.slot(self.stack_next_slot(st)), 1), 0xFFFFFFFF)

    def pin(self, st: Storage) -> Storage:
        """Evaluate a run-time slot number once (an lvalue bound for a whole call)."""
        if not isinstance(st.base, DynBase):
            return st
        v = ir.Var(self.env.gen.fresh("b"))
        self.env.build.emit(ir.Assign(v, ir.lift(st.base)))
        return Storage(DynBase(v), st.type, st.siblings)

    # ------------------------------------------------------------ validity
    def valid_code(self, st: Storage) -> ir.Expr:
        t = st.type
        if isinstance(t, HeaderT) and t.is_union:
            return ir.Or(tuple(ir.slot(member_storage(st, n).base) for n in t.fields))
        return ir.slot(st.base)

    def mark_valid(self, st: Storage) -> None:
        """Set the valid bit; a union member invalidates its siblings."""
        self.env.build.emit(ir.Assign(ir.slot(st.base), ir.Const(True)))
        for delta in st.siblings:
            self.env.build.emit(ir.Assign(ir.slot(st.base + delta), ir.Const(False)))

    def set_valid(self, st: Storage) -> None:
        """``setValid()``: BMv2's add_header zeroes an invalid header's fields first."""
        t = st.type
        with self.env.build.if_(ir.Not(ir.slot(st.base))):
            first = st.base + 1
            values = [_zero(ft) for ft in wire_fields(t)]
            if values:
                zeros = ir.Tuple(tuple(ir.Const(v) for v in values))
                self.env.build.emit(ir.Assign(ir.slots(first, len(values)), zeros))
            for i, ft in enumerate(wire_fields(t)):
                if isinstance(ft, VarbitT):  # BMv2 keeps the extracted length, zeroes the bytes
                    cell = ir.slot(first + i)
                    self.env.build.emit(ir.Assign(cell, ir.MethodCall(ir.Name("bytes"), (_len(cell),))))
            self.mark_valid(st)

    def set_invalid(self, st: Storage) -> None:
        self.env.build.emit(ir.Assign(ir.slot(st.base), ir.Const(False)))

    # ------------------------------------------------------------ copies
    def copy_value(self, dst: Storage, src: Storage) -> None:
        """``dst = src`` for any type, with BMv2's header copy rules."""
        t = dst.type
        n = dst.size
        if isinstance(t, HeaderT) and t.is_header:
            with self.env.build.if_(ir.slot(src.base)):
                self.env.build.emit(ir.Assign(ir.slots(dst.base, n), ir.slots(src.base, n)))
                for delta in dst.siblings:
                    self.env.build.emit(ir.Assign(ir.slot(dst.base + delta), ir.Const(False)))
            with self.env.build.else_():
                self.env.build.emit(ir.Assign(ir.slot(dst.base), ir.Const(False)))
        elif isinstance(t, StackT):
            k = self.slots_of(t.elem)
            for i in range(t.size):
                self.copy_value(Storage(dst.base + i * k, t.elem), Storage(src.base + i * k, t.elem))
            self.env.build.emit(ir.Assign(ir.slot(self.stack_next_slot(dst)), ir.slot(self.stack_next_slot(src))))
        elif isinstance(t, HeaderT) and contains_header(t):
            for name in t.fields:
                self.copy_value(member_storage(dst, name), member_storage(src, name))
        elif n == 1:
            self.env.build.emit(ir.Assign(ir.slot(dst.base), ir.slot(src.base)))
        else:
            self.env.build.emit(ir.Assign(ir.slots(dst.base, n), ir.slots(src.base, n)))

    # ------------------------------------------------------------ stacks
    def stack_shift(self, st: Storage, push: bool, count: int) -> None:
        t = st.type
        assert isinstance(t, StackT)
        if count == 0:
            return
        k = self.slots_of(t.elem)
        order, invalid = shift_order(t.size, count, push)
        moved = [j for j in range(t.size) if order[j] != j]
        if moved:
            tmp = ir.Var(self.env.gen.fresh("t"), ir.VarKind.ROW)
            self.env.build.emit(ir.Assign(tmp, ir.slots(st.base, t.size * k)))
            for j in moved:
                row = ir.RowPart(tmp, order[j] * k, (order[j] + 1) * k)
                self.env.build.emit(ir.Assign(ir.slots(st.base + j * k, k), row))
        for j in invalid:
            self.env.build.emit(ir.Assign(ir.slot(st.base + j * k), ir.Const(False)))
        nx = ir.slot(self.stack_next_slot(st))
        if push:
            self.env.build.emit(ir.Assign(nx, ir.Call("min", (ir.bin_("+", nx, count), ir.Const(t.size)))))
        else:
            self.env.build.emit(ir.Assign(nx, ir.Call("max", (ir.bin_("-", nx, count), ir.Const(0)))))

    # ------------------------------------------------------------ varbit
    def extract_varbit(self, st: Storage, nbits: Any) -> None:
        """``extract(h, nbits)`` of a header with a varbit field (parser code)."""
        t = st.type
        assert isinstance(t, HeaderT)
        fixed = t.width
        vmax = t.fields[t.varbit_field].max_width
        max_bytes = (fixed + vmax + 7) // 8
        err = self.env.error_codes
        n, tot = ir.Var(self.env.gen.fresh("n")), ir.Var(self.env.gen.fresh("tot"))
        pos = ir.Var("pos")

        def fail(code: str) -> None:
            self.env.build.emit(ir.Return(ir.Tuple((pos, ir.Const(err[code])))))

        self.env.build.emit(ir.Assign(n, ir.lift(nbits)))
        with self.env.build.if_(ir.bin_("%", n, 8)):
            fail("ParserInvalidArgument")
        self.env.build.emit(ir.Assign(tot, ir.bin_("+", fixed // 8, ir.bin_("//", n, 8))))
        with self.env.build.if_(ir.cmp("<", ir.bin_("-", ir.PacketLength(), pos), tot)):
            fail("PacketTooShort")
        with self.env.build.if_(ir.cmp(">", tot, max_bytes)):
            fail("HeaderTooShort")
        x = ir.Var("_x")
        self.env.build.emit(ir.Assign(x, ir.PacketInt(pos, tot)))
        widths = [0 if isinstance(ft, VarbitT) else bit_width(ft) for ft in t.fields.values()]
        first = st.base + 1
        seen_varbit = False
        for i, ft in enumerate(t.fields.values()):
            after = sum(widths[i + 1:])
            if isinstance(ft, VarbitT):
                seen_varbit = True
                shifted = ir.bin_(">>", x, after) if after else x
                value = ir.bin_("&", shifted, ir.bin_("-", ir.bin_("<<", 1, n), 1))
                self.env.build.emit(ir.Assign(ir.slot(first + i), _to_bytes(value, ir.bin_("//", n, 8))))
                continue
            mask = (1 << widths[i]) - 1
            if not seen_varbit:
                val = ir.bin_("&", ir.bin_(">>", x, ir.bin_("+", after, n)), mask)
            elif after:
                val = ir.bin_("&", ir.bin_(">>", x, after), mask)
            else:
                val = ir.bin_("&", x, mask)
            self.env.build.emit(ir.Assign(ir.slot(first + i), ir.lift(self.env.packet.from_raw(val, ft))))
        self.mark_valid(st)
        self.env.build.emit(ir.AugAssign(pos, "+", tot))

    def emit_varbit_header(self, st: Storage) -> None:
        """Deparse a valid header with a varbit field: its fields' bits, MSB first."""
        t = st.type
        assert isinstance(t, HeaderT)
        first = st.base + 1
        vb = ir.slot(first + list(t.fields).index(t.varbit_field))
        acc: ir.Expr = ir.Const(0)
        for i, ft in enumerate(t.fields.values()):
            if isinstance(ft, VarbitT):
                acc = ir.bin_("|", ir.bin_("<<", acc, ir.bin_("*", _len(vb), 8)), ir.Call("int_of_bytes", (vb,)))
            else:
                w = bit_width(ft)
                acc = ir.bin_("|", ir.bin_("<<", acc, w), ir.bin_("&", ir.slot(first + i), (1 << w) - 1))
        with self.env.build.if_(ir.slot(st.base)):
            self.env.build.emit(ir.Emit(ir.ToBytes(acc, ir.bin_("+", t.width // 8, _len(vb)))))


def _len(e: ir.Expr) -> ir.Expr:
    """``len(e)`` of a byte string (a varbit field: Python only)."""
    return ir.MethodCall(ir.Name("len"), (e,))


def _to_bytes(value: ir.Expr, n: ir.Expr) -> ir.Expr:
    """``value.to_bytes(n, 'big')`` as a varbit field's byte string (Python only)."""
    return ir.MethodCall(ir.Attr(value, "to_bytes"), (n, ir.Const("big")))
