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

from typing import Any

from ..frontend.types import BOOL, HeaderT, StackT, Type, VarbitT, bit_width, wire_fields
from .storage import DynBase, Storage, member_storage, slot_count


class StackIndexError(Exception):
    """A run-time header stack index outside the stack: the packet is dropped."""


def stack_index(i: int, size: int) -> int:
    """Bounds check for a run-time stack index (generated code calls it)."""
    if 0 <= i < size:
        return i
    raise StackIndexError(i)


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
    """Code generation for validity, copies, stacks and varbit; mixed into CodeGen."""

    # provided by CodeGen
    emit: Any
    fresh: Any
    const: Any
    error_codes: dict[str, int]

    # ------------------------------------------------------------ storage helpers
    def stack_next_slot(self, st: Storage) -> Any:
        t = st.type
        assert isinstance(t, StackT)
        return st.base + t.size * self.slots_of(t.elem)

    def slots_of(self, t: Type) -> int:
        return slot_count(t)

    def element(self, st: Storage, index_code: str) -> Storage:
        """Element ``index_code`` (run-time) of the stack at ``st``; bounds-checked."""
        t = st.type
        assert isinstance(t, StackT)
        k = self.slots_of(t.elem)
        base = DynBase(f"{st.base} + stack_index({index_code}, {t.size}) * {k}")
        return Storage(base, t.elem)

    def stack_next(self, st: Storage) -> Storage:
        """``s.next``: the element at the next index (callers check it is in bounds)."""
        t = st.type
        k = self.slots_of(t.elem)
        return Storage(DynBase(f"{st.base} + S[{self.stack_next_slot(st)}] * {k}"), t.elem)

    def stack_last(self, st: Storage) -> Storage:
        return self.element(st, f"S[{self.stack_next_slot(st)}] - 1")

    def last_index_code(self, st: Storage) -> str:
        return f"((S[{self.stack_next_slot(st)}] - 1) & 0xFFFFFFFF)"

    def pin(self, st: Storage) -> Storage:
        """Evaluate a run-time slot number once (an lvalue bound for a whole call)."""
        if not isinstance(st.base, DynBase):
            return st
        v = self.fresh("b")
        self.emit(f"{v} = {st.base}")
        return Storage(DynBase(v), st.type, st.siblings)

    # ------------------------------------------------------------ validity
    def valid_code(self, st: Storage) -> str:
        t = st.type
        if isinstance(t, HeaderT) and t.is_union:
            return "(" + " or ".join(f"S[{member_storage(st, n).base}]" for n in t.fields) + ")"
        return f"S[{st.base}]"

    def mark_valid(self, st: Storage) -> None:
        """Set the valid bit; a union member invalidates its siblings."""
        self.emit(f"S[{st.base}] = True")
        for delta in st.siblings:
            self.emit(f"S[{st.base + delta}] = False")

    def set_valid(self, st: Storage) -> None:
        """``setValid()``: BMv2's add_header zeroes an invalid header's fields first."""
        t = st.type
        self.emit(f"if not S[{st.base}]:")
        self.indent += 1
        first = st.base + 1
        values = [_zero(ft) for ft in wire_fields(t)]
        if values:
            self.emit(f"S[{first}:{first + len(values)}] = {values!r}")
        for i, ft in enumerate(wire_fields(t)):
            if isinstance(ft, VarbitT):  # BMv2 keeps the extracted length, zeroes the bytes
                self.emit(f"S[{first + i}] = bytes(len(S[{first + i}]))")
        self.mark_valid(st)
        self.indent -= 1

    def set_invalid(self, st: Storage) -> None:
        self.emit(f"S[{st.base}] = False")

    # ------------------------------------------------------------ copies
    def copy_value(self, dst: Storage, src: Storage) -> None:
        """``dst = src`` for any type, with BMv2's header copy rules."""
        t = dst.type
        n = dst.size
        if isinstance(t, HeaderT) and t.is_header:
            self.emit(f"if S[{src.base}]:")
            self.emit(f"    S[{dst.base}:{dst.base + n}] = S[{src.base}:{src.base + n}]")
            for delta in dst.siblings:
                self.emit(f"    S[{dst.base + delta}] = False")
            self.emit("else:")
            self.emit(f"    S[{dst.base}] = False")
        elif isinstance(t, StackT):
            k = self.slots_of(t.elem)
            for i in range(t.size):
                self.copy_value(Storage(dst.base + i * k, t.elem), Storage(src.base + i * k, t.elem))
            self.emit(f"S[{self.stack_next_slot(dst)}] = S[{self.stack_next_slot(src)}]")
        elif isinstance(t, HeaderT) and contains_header(t):
            for name in t.fields:
                self.copy_value(member_storage(dst, name), member_storage(src, name))
        elif n == 1:
            self.emit(f"S[{dst.base}] = S[{src.base}]")
        else:
            self.emit(f"S[{dst.base}:{dst.base + n}] = S[{src.base}:{src.base + n}]")

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
            tmp = self.fresh("t")
            self.emit(f"{tmp} = S[{st.base}:{st.base + t.size * k}]")
            for j in moved:
                self.emit(f"S[{st.base + j * k}:{st.base + (j + 1) * k}] = {tmp}[{order[j] * k}:{(order[j] + 1) * k}]")
        for j in invalid:
            self.emit(f"S[{st.base + j * k}] = False")
        nx = self.stack_next_slot(st)
        if push:
            self.emit(f"S[{nx}] = min(S[{nx}] + {count}, {t.size})")
        else:
            self.emit(f"S[{nx}] = max(S[{nx}] - {count}, 0)")

    # ------------------------------------------------------------ varbit
    def extract_varbit(self, st: Storage, nbits_code: str) -> None:
        """``extract(h, nbits)`` of a header with a varbit field (parser code)."""
        t = st.type
        assert isinstance(t, HeaderT)
        fixed = t.width
        vmax = t.fields[t.varbit_field].max_width
        max_bytes = (fixed + vmax + 7) // 8
        err = self.error_codes
        n, tot = self.fresh("n"), self.fresh("tot")
        self.emit(f"{n} = {nbits_code}")
        self.emit(f"if {n} % 8:")
        self.emit(f"    return pos, {err['ParserInvalidArgument']}")
        self.emit(f"{tot} = {fixed // 8} + {n} // 8")
        self.emit(f"if L - pos < {tot}:")
        self.emit(f"    return pos, {err['PacketTooShort']}")
        self.emit(f"if {tot} > {max_bytes}:")
        self.emit(f"    return pos, {err['HeaderTooShort']}")
        self.emit(f"_x = int.from_bytes(data[pos:pos + {tot}], 'big')")
        widths = [0 if isinstance(ft, VarbitT) else bit_width(ft) for ft in t.fields.values()]
        first = st.base + 1
        seen_varbit = False
        for i, ft in enumerate(t.fields.values()):
            after = sum(widths[i + 1:])
            if isinstance(ft, VarbitT):
                seen_varbit = True
                shifted = f"(_x >> {after})" if after else "_x"
                self.emit(f"S[{first + i}] = ({shifted} & ((1 << {n}) - 1)).to_bytes({n} // 8, 'big')")
                continue
            shift = f"{after} + {n}" if not seen_varbit else str(after)
            val = f"(_x >> ({shift})) & {(1 << widths[i]) - 1}" if shift != "0" else f"_x & {(1 << widths[i]) - 1}"
            self.emit(f"S[{first + i}] = {self.from_raw(val, ft)}")
        self.mark_valid(st)
        self.emit(f"pos += {tot}")

    def emit_varbit_header(self, st: Storage) -> None:
        """Deparse a valid header with a varbit field: its fields' bits, MSB first."""
        t = st.type
        assert isinstance(t, HeaderT)
        first = st.base + 1
        vb = first + list(t.fields).index(t.varbit_field)
        acc = "0"
        for i, ft in enumerate(t.fields.values()):
            if isinstance(ft, VarbitT):
                acc = f"(({acc}) << (len(S[{vb}]) * 8)) | int.from_bytes(S[{vb}], 'big')"
            else:
                w = bit_width(ft)
                acc = f"(({acc}) << {w}) | (S[{first + i}] & {(1 << w) - 1})"
        self.emit(f"if S[{st.base}]:")
        self.emit(f"    OUT.append(({acc}).to_bytes({t.width // 8} + len(S[{vb}]), 'big'))")
