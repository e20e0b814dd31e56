"""Sizes a P4 program may ask for, checked before any integer of that size is built.

A width, a stack size or a shift amount is program text, so ``bit<12301923123132>`` or
``1 << 100000000000`` would otherwise make the frontend allocate terabytes or spin.  p4c's
limits come first, with p4c's wording (ir/type.cpp, constantParsing.cpp, constantFolding.cpp,
``Constant::asInt``), so a program p4c refuses is refused at the same spot; then the built-in
target's own, so no value of a type it cannot hold is ever materialised.
"""

from __future__ import annotations

from . import ast
from .errors import P4Error
from .types import BitsT, Type, wrap

C_INT_MAX = (1 << 31) - 1  # p4c holds widths, sizes, indexes and shift amounts in a C int
P4C_MAX_WIDTH = 2048  # p4c's maximumWidthSupported (ir/configuration.h): literals and folded constants
MAX_FRAME_BYTES = 65536  # the largest frame the built-in target receives (ports.MAX_FRAME, portio.c)
TARGET_MAX_WIDTH = 8 * MAX_FRAME_BYTES  # a wider value could never be extracted, emitted or sent
TARGET_MAX_STACK = MAX_FRAME_BYTES  # every element is allocated; no frame fills more (one byte or more each)
TARGET_MAX_CELLS = 1 << 20  # register/counter/meter cells, table entries: allocated (and copied) at switch start


def c_int(e: ast.Expr, value: int) -> int:
    """A constant p4c reads with ``asInt`` (a stack size, an index, a slice bound, a shift)."""
    if not -C_INT_MAX - 1 <= value <= C_INT_MAX:
        raise P4Error(e.loc, f"{shown(value)}: Value too large for int")
    return value


def type_width(ref: ast.TypeRef, width: int) -> int:
    """The width of ``bit<W>``/``int<W>``/``varbit<W>``: p4c's rules, then the target's."""
    if not -C_INT_MAX - 1 <= width <= C_INT_MAX:
        raise P4Error(ref.width.loc, f"{shown(width)}: this implementation does not support bitstrings this large")
    if width < 0:
        raise P4Error(ref.loc, f"Width {width} of type cannot be negative")
    if width == 0 and ref.kind == "int":
        raise P4Error(ref.loc, "Width of signed type cannot be zero")
    if width > TARGET_MAX_WIDTH:
        raise P4Error(ref.loc, f"{ref.kind}<{width}> is wider than the built-in target supports ({TARGET_MAX_WIDTH})")
    return width


def stack_size(ref: ast.TypeRef, size: int) -> int:
    """The size of ``h[N]``: a C int for p4c, at most one element per byte of a frame here."""
    c_int(ref.width, size)
    if size > TARGET_MAX_STACK:
        raise P4Error(ref.width.loc, f"a stack of {size} elements is larger than the built-in target "
                                     f"supports ({TARGET_MAX_STACK})")
    return size


def literal_width(e: ast.IntLit) -> None:
    """``Nw…``/``Ns…``: p4c refuses N > 2048 while parsing the literal."""
    if e.width is not None and e.width > P4C_MAX_WIDTH:
        raise P4Error(e.loc, f"{ast.text(e)}: {e.width} size too large")


def folded_width(e: ast.Expr, width: int) -> None:
    """A constant p4c folds to more than 2048 bits (a shift, a concatenation, a slice)."""
    if width > P4C_MAX_WIDTH:
        raise P4Error(e.loc, f"{_show_expr(e)}: Compiler only supports widths up to {P4C_MAX_WIDTH}")


def concat_width(e: ast.Binary, width: int, constant: bool) -> None:
    """``a ++ b``: p4c folds constants up to 2048 bits; no value is wider than the target's."""
    if constant:
        folded_width(e, width)
    if width > TARGET_MAX_WIDTH:
        raise P4Error(e.loc, f"bit<{width}> is wider than the built-in target supports ({TARGET_MAX_WIDTH})")


def fold_product(e: ast.Binary, a: int, b: int) -> None:
    """Repeated squaring of unsized constants doubles their size each time: refuse a product
    wider than any value the target holds before computing it."""
    if e.op == "*" and a.bit_length() + b.bit_length() > TARGET_MAX_WIDTH + 1:
        raise P4Error(e.loc, f"{_show_expr(e)}: the product is wider than the built-in target supports "
                             f"({TARGET_MAX_WIDTH} bits)")


def extern_sizes(decl: ast.Instantiation, params: list) -> None:
    """A ``size`` constructor argument (register, counter, meter, value_set): every cell is
    allocated up front, so a size beyond the target's memory is refused here, at the argument."""
    for p, a in zip(params, decl.args):
        if p.name == "size" and isinstance(a.value, int) and a.value > TARGET_MAX_CELLS:
            raise P4Error(a.loc, f"{decl.name}: {shown(a.value)} cells is more than the built-in target "
                                 f"supports ({TARGET_MAX_CELLS})")


def table_size(table: str, e: ast.Expr, size: int) -> None:
    """A table's ``size``: the built-in target sizes its entry arrays by it when the switch starts."""
    if size > TARGET_MAX_CELLS:
        raise P4Error(e.loc, f"{table}: a size of {shown(size)} entries is more than the built-in target "
                             f"supports ({TARGET_MAX_CELLS})")


def fold_shift(e: ast.Binary, value: int, amount: int, t: Type) -> int:
    """``value << amount`` / ``value >> amount`` of constants, never wider than p4c allows."""
    c_int(e.right, amount)
    folded_width(e, amount)
    if e.op == ">>":
        return wrap(value >> amount, t)
    if isinstance(t, BitsT) and amount >= t.width:  # every bit shifted out
        return 0
    return wrap(value << amount, t)


def _show_expr(e: ast.Expr) -> str:
    try:
        return ast.text(e)
    except ValueError:  # a literal of more than 4300 decimal digits
        return "this expression"


def shown(value: int | bool) -> str:
    """A number for a message, decimal as p4c prints it; Python refuses more than 4300 digits."""
    return str(value) if isinstance(value, bool) or value.bit_length() < 14000 else hex(value)
