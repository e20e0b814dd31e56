"""Print the executor's representation (``ir``) as the Python module the switch executes.

The Python is the reference the C path is checked against, so it is printed plainly: every
compound expression in parentheses, one statement per line.  Runtime objects are named as the
generated module's namespace binds them (``Obj.name``); locals and parameters keep their names.
"""

from __future__ import annotations

from collections.abc import Callable

from . import ir
from .exceptions import CLASS

_EXIT = CLASS[ir.Exc.EXIT].__name__  # what P4 exit raises and TryExit catches
_PRINTERS: dict[type, Callable[[ir.Expr], str]] = {}


def _prints(cls: type) -> Callable:
    def register(fn: Callable[[ir.Expr], str]) -> Callable[[ir.Expr], str]:
        _PRINTERS[cls] = fn
        return fn
    return register


def expr(e: ir.Expr) -> str:
    try:
        printer = _PRINTERS[type(e)]
    except KeyError:
        raise TypeError(f"no Python for {type(e).__name__}") from None
    return printer(e)


def _items(xs: tuple[ir.Expr, ...]) -> str:
    """A tuple's Python, one-element tuples with their comma."""
    return "(" + "".join(f"{expr(x)}, " for x in xs) + ")"


_PYTHON_CALLS = {"int_of_bytes": "int.from_bytes({0}, 'big')"}


def _constant(value: object) -> str:
    """A constant's Python; a wide integer in hex, which Python prints at any width (decimal
    stops at 4300 digits, a bit<14285> mask)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return hex(value)
    return repr(value)

_prints(ir.Const)(lambda e: _constant(e.value))
_prints(ir.Var)(lambda e: e.name)
_prints(ir.Slot)(lambda e: f"S[{expr(e.index)}]")
_prints(ir.Obj)(lambda e: e.name)
_prints(ir.Name)(lambda e: e.name)
_prints(ir.PacketLength)(lambda e: "L")
_prints(ir.Bin)(lambda e: f"({expr(e.a)} {e.op} {expr(e.b)})")
_prints(ir.Cmp)(lambda e: f"({expr(e.a)} {e.op} {expr(e.b)})")
_prints(ir.Not)(lambda e: f"(not {expr(e.a)})")
_prints(ir.Neg)(lambda e: f"(-{expr(e.a)})")
_prints(ir.Invert)(lambda e: f"(~{expr(e.a)})")
_prints(ir.And)(lambda e: "(" + " and ".join(expr(x) for x in e.items) + ")")
_prints(ir.Or)(lambda e: "(" + " or ".join(expr(x) for x in e.items) + ")")
_prints(ir.Select)(lambda e: f"({expr(e.then)} if {expr(e.cond)} else {expr(e.other)})")
_prints(ir.Hash)(lambda e: f"HASHES[{e.algo!r}]" + ("" if e.data is None else f"({expr(e.data)})"))
_prints(ir.Tuple)(lambda e: _items(e.items))
_prints(ir.Concat)(lambda e: f"({expr(e.a)} + {expr(e.b)})")
_prints(ir.Payload)(lambda e: "PAYLOAD[0]")
_prints(ir.IngressLength)(lambda e: "INGRESS_LENGTH[0]")
_prints(ir.PacketInt)(lambda e: f"int.from_bytes(data[{expr(e.pos)}:{expr(e.pos)} + {expr(e.n)}], 'big')")
_prints(ir.Unpack)(lambda e: f"{expr(e.struct)}.unpack_from(data, {expr(e.pos)})")
_prints(ir.Pack)(lambda e: f"{expr(e.struct)}.pack(*{expr(e.slots)})")
_prints(ir.ToBytes)(lambda e: f"({expr(e.value)}).to_bytes({expr(e.n)}, 'big')")
_prints(ir.TableLookup)(lambda e: f"{expr(e.table)}.lookup({_items(e.keys)})")
_prints(ir.DefaultEntry)(lambda e: f"{expr(e.table)}.default_entry")
_prints(ir.EntryAction)(lambda e: f"{expr(e.entry)}.action.name")
_prints(ir.IsNone)(lambda e: f"({expr(e.entry)} is None)")
_prints(ir.Apply)(lambda e: f"{e.fn}(S)")
_prints(ir.ApplyHit)(lambda e: f"{expr(e.result)}[0]")
_prints(ir.ApplyAction)(lambda e: f"{expr(e.result)}[1]")
_prints(ir.RegCell)(lambda e: f"{expr(e.reg)}.cells[{expr(e.index)}]")
_prints(ir.CounterCell)(lambda e: f"{expr(e.counter)}.{e.which}[{expr(e.index)}]")
_prints(ir.EntryCount)(lambda e: f"{expr(e.entry)}.counter[{e.which}]")
_prints(ir.VsetMatches)(lambda e: f"{expr(e.vset)}.matches({_items(e.keys)})")
_prints(ir.SlotsTuple)(lambda e: f"tuple({expr(e.slots)})")
_prints(ir.Attr)(lambda e: f"{expr(e.base)}.{e.name}")


@_prints(ir.Slots)
def _slots(e: ir.Slots) -> str:
    if isinstance(e.lo, ir.Const):
        return f"S[{e.lo.value}:{e.lo.value + e.n}]"
    return f"S[{expr(e.lo)}:{expr(e.lo)} + {e.n}]"


@_prints(ir.RowPart)
def _row_part(e: ir.RowPart) -> str:
    return f"{e.row.name}[{e.lo}:{e.hi}]"


@_prints(ir.Call)
def _call(e: ir.Call) -> str:
    args = [expr(a) for a in e.args]
    if e.fn in _PYTHON_CALLS:
        return _PYTHON_CALLS[e.fn].format(*args)
    return f"{e.fn}({', '.join(args)})"


@_prints(ir.Item)
def _item(e: ir.Item) -> str:
    if e.hi is None:
        return f"{expr(e.base)}[{expr(e.index)}]"
    return f"{expr(e.base)}[{expr(e.index)}:{expr(e.hi)}]"


@_prints(ir.MethodCall)
def _method_call(e: ir.MethodCall) -> str:
    args = [expr(a) for a in e.args]
    if e.star:
        args[-1] = "*" + args[-1]
    return f"{expr(e.fn)}({', '.join(args)})"


# ================================================================ statements
def stmts(body: list[ir.Stmt], depth: int) -> list[str]:
    """The lines of a block at indentation ``depth``; an empty block is ``pass``."""
    out: list[str] = []
    for s in body:
        out += stmt(s, depth)
    return out or ["    " * depth + "pass"]


def stmt(s: ir.Stmt, depth: int) -> list[str]:
    pad = "    " * depth
    if isinstance(s, ir.Assign):
        return [f"{pad}{expr(s.target)} = {expr(s.value)}"]
    if isinstance(s, ir.AugAssign):
        return [f"{pad}{expr(s.target)} {s.op}= {expr(s.value)}"]
    if isinstance(s, ir.If):
        out = [f"{pad}if {expr(s.cond)}:", *stmts(s.then, depth + 1)]
        other = s.other
        while len(other) == 1 and isinstance(other[0], ir.If):  # an elif chain, flat
            out += [f"{pad}elif {expr(other[0].cond)}:", *stmts(other[0].then, depth + 1)]
            other = other[0].other
        if other:
            out += [f"{pad}else:", *stmts(other, depth + 1)]
        return out
    if isinstance(s, ir.Loop):
        return [f"{pad}while True:", *stmts(s.body, depth + 1)]
    if isinstance(s, ir.ForRange):
        return [f"{pad}for {s.var.name} in range({expr(s.lo)}, {expr(s.hi)}):", *stmts(s.body, depth + 1)]
    if isinstance(s, ir.TryExit):
        return [f"{pad}try:", *stmts(s.body, depth + 1), f"{pad}except {_EXIT}:", *stmts(s.handler, depth + 1)]
    if isinstance(s, ir.Return):
        if s.value is None:
            return [f"{pad}return"]
        if isinstance(s.value, ir.Tuple):
            return [f"{pad}return {', '.join(expr(x) for x in s.value.items)}"]
        return [f"{pad}return {expr(s.value)}"]
    if isinstance(s, ir.Raise):
        if s.exc is None:
            return [f"{pad}raise"]
        name = CLASS[s.exc].__name__
        if s.exc is ir.Exc.EXIT:
            return [f"{pad}raise {name}"]
        return [f"{pad}raise {name}({'' if s.message is None else repr(s.message)})"]
    if isinstance(s, ir.Do):
        return [f"{pad}{expr(s.value)}"]
    if isinstance(s, ir.Emit):
        return [f"{pad}OUT.append({expr(s.value)})"]
    if isinstance(s, ir.RunAction):
        return [f"{pad}{s.entry.name}.action.fn(S, *{s.entry.name}.args)"]
    if isinstance(s, ir.Comment):
        return [f"{pad}# {s.text}"]
    simple = {ir.Break: "break", ir.Continue: "continue", ir.Pass: "pass"}.get(type(s))
    if simple is None:
        raise TypeError(f"no Python for {type(s).__name__}")
    return [pad + simple]


def function(fn: ir.Function) -> str:
    prologue = ["    L = len(data)"] if fn.kind is ir.Kind.PARSER else []  # PacketLength
    return "\n".join([f"def {fn.name}({', '.join(fn.params)}):", *prologue, *stmts(fn.body, 1), ""]) + "\n"


def module(m: ir.Module) -> str:
    return "".join(function(f) for f in m.functions)
