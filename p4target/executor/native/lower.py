"""Lower the executor's program representation (``ir``) to C.

``codegen.CodeGen`` is the one place that knows P4 semantics.  It writes a program once, as an
``ir.Module`` (``Generated.module``): ``python.py`` prints that tree as the Python the switch
runs (the reference), and this module prints the same tree as C, node by node, so the C runs
exactly the operations the Python runs.  The tree is small and regular: reads and writes of the
state list ``S`` at constant (or bounds-checked) indexes, integer arithmetic that wraps by
explicit masks, ``If``/``Loop``/``ForRange``/``Break``, ``TryExit`` for P4 ``exit``, reads of
the packet (``PacketInt``, ``Unpack``) and the runtime objects' operations (``TableLookup``,
``RunAction``, ``RegCell``, ``CounterCell``, ``EntryCount``, ``VsetMatches``, ``Emit`` ...),
each naming its object with ``ir.Obj``:

* every slot and temporary is a ``v_t`` (``__int128``, built with ``-fwrapv``): bit<W> and
  int<W> values with W <= 64 and every intermediate result the Python forms before masking
  fit, and +, -, *, << wrap modulo 2**128, which the Python's masks make exact; a local's
  ``ir.VarKind`` gives its C type (a table entry is a row number, a ``ROW`` an array);
* ``Raise(Exc.EXIT)`` becomes a jump to the enclosing ``TryExit``'s handler, or
  ``ctx->exiting`` for the caller to see; the exceptions that drop a packet (stack index,
  assert, register conflict, loop limit) ``longjmp`` to the packet's entry point;
* runtime objects become arrays in ``ctx`` (runtime.h) that Python owns; TNA's ``ir.UNSET``
  is a value no slot can otherwise hold.

The generic nodes (``Name``, ``Attr``, ``Item``, ``MethodCall``: what only the Python executor
runs) and anything else outside that subset raise ``Unsupported`` naming it; the switch then
runs the program in Python, as before.
"""

from __future__ import annotations

import dataclasses
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...frontend.types import BOOL, BitsT, HeaderT, Type
from .. import ir, python
from ..externs import Counter, Meter, Register, ValueSet
from ..tables import Table
from . import reroll

V_MIN, V_MAX = -(1 << 127), (1 << 127) - 1
_C_NAME = re.compile(r"[A-Za-z_]\w*")
UNSET_C = "((v_t)1 << 126)"  # TNA's unwritten ucast_egress_port: no value a slot can take
_C_OPS = {"+": "+", "-": "-", "*": "*", "&": "&", "|": "|", "^": "^"}
_DROPS = {ir.Exc.REGISTER_CONFLICT: "DROP_REGISTER_CONFLICT", ir.Exc.ASSERTION: "DROP_ASSERT",
          ir.Exc.LOOP_LIMIT: "DROP_LOOP"}
_STRUCT_SIZES = {"b": 1, "h": 2, "i": 4, "q": 8}
_HASHES = {"crc16": "crc16", "crc32": "crc32", "csum16": "csum16", "identity": "identity_hash"}


class Unsupported(Exception):
    """The program uses something the C lowering does not cover; it runs in Python."""


@dataclass
class Objects:
    """The runtime objects generated code names, numbered as the C arrays index them."""

    tables: list[Table] = field(default_factory=list)
    registers: list[Register] = field(default_factory=list)
    counters: list[Counter] = field(default_factory=list)
    value_sets: list[ValueSet] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # global action ids: the names of every table's actions

    def action_id(self, name: str) -> int:
        return self.actions.index(name)


@dataclass
class Lowered:
    """The C for one program, and the objects its arrays stand for."""

    source: str
    objects: Objects
    unset_slots: frozenset[int]
    max_header_bytes: int  # the most a deparser can emit
    banks: tuple[tuple[int, int], ...] = ()  # register banks: (first register, how many), see Lowering._bank


def c_int(v: int | bool) -> str:
    v = int(v)
    if not V_MIN <= v <= V_MAX:
        raise Unsupported(f"the constant {v:#x} does not fit in 128 bits")  # hex: decimal stops at 4300 digits
    if -(1 << 62) <= v < (1 << 62):
        return f"((v_t){v}LL)"
    u = v & ((1 << 128) - 1)
    return f"((v_t)(((u_t){u >> 64:#x}ULL << 64) | (u_t){u & ((1 << 64) - 1):#x}ULL))"


# ---------------------------------------------------------------- reading the tree
_FIELDS: dict[type, tuple[str, ...]] = {}


def _children(node: ir.Expr | ir.Stmt) -> Iterator[ir.Expr | ir.Stmt]:
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(f.name for f in dataclasses.fields(node))
    for name in names:
        v = getattr(node, name)
        if isinstance(v, (ir.Expr, ir.Stmt)):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (x for x in v if isinstance(x, (ir.Expr, ir.Stmt)))


def _walk(nodes: list[ir.Stmt]) -> Iterator[ir.Expr | ir.Stmt]:
    """Every node under ``nodes``, in the order they are written (depth first)."""
    stack: list[Any] = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(_children(node))))


def _module_nodes(module: ir.Module) -> Iterator[ir.Expr | ir.Stmt]:
    for fn in module.functions:
        yield from _walk(fn.body)


def _objects(module: ir.Module) -> dict[str, Any]:
    """The runtime objects the module names (``Obj``): name -> object, first use first."""
    found: dict[str, Any] = {}
    for node in _module_nodes(module):
        if isinstance(node, ir.Obj) and node.name not in found:
            found[node.name] = node.value
    return found


def _py(node: ir.Expr | ir.Stmt) -> str:
    """A node's Python (what Unsupported names), shortened."""
    try:
        text = python.expr(node) if isinstance(node, ir.Expr) else " ".join(python.stmt(node, 0))
    except Exception:  # a node only the lowering knows (reroll.LoopSlot ...)
        text = type(node).__name__
    return text[:60]


def _int_const(e: ir.Expr) -> int | None:
    if isinstance(e, ir.Const) and isinstance(e.value, int):
        return int(e.value)
    return None


def _mask_width(e: ir.Expr) -> int | None:
    """The width w of a constant mask 2**w - 1."""
    m = e.value if isinstance(e, ir.Const) else None
    if isinstance(m, int) and not isinstance(m, bool) and m > 0 and m & (m + 1) == 0:
        return m.bit_length()
    return None


def _const_slots(e: ir.Expr) -> tuple[int, int] | None:
    """Slots with a constant start: (lo, n)."""
    if isinstance(e, ir.Slots):
        lo = _int_const(e.lo)
        if lo is not None:
            return lo, e.n
    return None


def _slot_ranges(slots: set[int]) -> list[tuple[int, int]]:
    """Sorted slots as runs: (first, how many)."""
    runs: list[tuple[int, int]] = []
    for k in sorted(slots):
        if runs and runs[-1][0] + runs[-1][1] == k:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((k, 1))
    return runs


def slot_writes(functions: dict[str, ir.Function]) -> dict[str, frozenset[int] | None]:
    """Each function's write set: the slots it, the applies it calls and the actions of the tables it looks
    up may assign, or None if one of them assigns a slot at a run-time index (a header stack).  v1model.h
    puts back only the egress blocks' for each further multicast replica, and tna.h resets only those from
    TEMPLATE for each egress copy, instead of copying every slot."""
    own: dict[str, set[int] | None] = {}
    calls: dict[str, set[str]] = {}
    for name, fn in functions.items():
        written: set[int] | None = set()
        callees: set[str] = set()
        for node in _walk(fn.body):
            if isinstance(node, ir.Apply):
                callees.add(node.fn)
            elif isinstance(node, ir.Obj) and isinstance(node.value, Table):
                callees.update(spec.fn.__name__ for spec in node.value.actions.values())
            elif isinstance(node, (ir.Assign, ir.AugAssign)) and written is not None:
                t = node.target
                if isinstance(t, ir.Slot):
                    k = _int_const(t.index)
                    written = None if k is None else written | {k}
                elif isinstance(t, ir.Slots):
                    rng = _const_slots(t)
                    written = None if rng is None else written | set(range(rng[0], rng[0] + rng[1]))
        own[name], calls[name] = written, callees
    result: dict[str, frozenset[int] | None] = {}
    for name in functions:
        seen, todo = {name}, [name]
        total: set[int] | None = set()
        while todo and total is not None:
            f = todo.pop()
            mine = own.get(f, set())
            total = None if mine is None else total | mine
            for g in calls.get(f, ()):
                if g not in seen:
                    seen.add(g)
                    todo.append(g)
        result[name] = None if total is None else frozenset(total)
    return result


@dataclass
class _Function:
    fn: ir.Function
    params: frozenset[str]  # an action's data
    locals: dict[str, str] = field(default_factory=dict)  # name -> C declaration
    entry_table: dict[str, int] = field(default_factory=dict)  # local holding a table row -> table id
    bitbufs: set[str] = field(default_factory=set)  # locals holding PacketInt bytes (name, name_n: its length)
    arrays: dict[str, int] = field(default_factory=dict)  # ROW locals -> length
    handlers: list[str] = field(default_factory=list)  # enclosing TryExit handlers' labels, innermost last

    @property
    def name(self) -> str:
        return self.fn.name

    @property
    def kind(self) -> ir.Kind:
        return self.fn.kind


class Lowering:
    """One program's module, lowered; ``lower()`` returns the C."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module
        self.template = module.template
        self.obj = Objects()
        self._ids: dict[int, int] = {}  # id(python object) -> its index in its Objects list
        self.names: dict[int, str] = {}  # id(python object) -> the name it was first found under
        self.unset_slots: set[int] = set()
        self.counter = 0
        self.fn: _Function | None = None
        self.functions: dict[str, ir.Function] = {}
        self.emitted: dict[str, int] = {}  # deparser -> bytes its appends add up to
        self._buffer_sizes: list[int] = []
        self.banks: list[tuple[int, int]] = []
        self.bank_of: dict[int, tuple[int, int, int]] = {}  # register id -> (its bank's first, column, width)
        self.cached: dict[int, str] = {}  # slot -> the C local it lives in, in a re-rolled loop

    # ================================================================ driver
    def lower(self) -> Lowered:
        self._check_template()
        for fn in self.module.functions:
            if fn.name in self.functions:
                raise Unsupported(f"two functions named {fn.name}")
            self.functions[fn.name] = fn
        self._collect_objects()
        self._bank()
        self._find_unset_slots()
        bodies = [self._function(fn) for fn in self.functions.values()]
        protos = [self._prototype(fn) + ";" for fn in self.functions.values()]
        dispatch = [self._dispatch(t) for t in self.obj.tables]
        template = ", ".join(f"[{i}] = {UNSET_C if isinstance(v, ir.Unset) else c_int(v)}"
                             for i, v in enumerate(self.template) if v or isinstance(v, ir.Unset))
        head = [
            f"#define N_SLOTS {len(self.template)}",
            f"#define N_TABLES {len(self.obj.tables)}",
            f"#define N_REGS {len(self.obj.registers)}",
            f"#define N_COUNTERS {len(self.obj.counters)}",
            f"#define N_VSETS {len(self.obj.value_sets)}",
            '#include "runtime.h"',
            f"static const v_t TEMPLATE[N_SLOTS] = {{{template}}};",
            "static inline int slots_eq(const v_t *a, const v_t *b, long n) { return !memcmp(a, b, n * sizeof(v_t)); }",
        ]
        source = "\n".join(head + protos + [""] + self._write_copies() + dispatch + bodies) + "\n"
        return Lowered(source, self.obj, frozenset(self.unset_slots), max(self.emitted.values(), default=0),
                       tuple(self.banks))

    def _write_copies(self) -> list[str]:
        """For each parser, control and deparser, ``writes_<name>(to, from)``: copies the slots it may write."""
        writes = slot_writes(self.functions)
        lines = []
        for name, fn in self.functions.items():
            if fn.kind not in (ir.Kind.PARSER, ir.Kind.CONTROL, ir.Kind.DEPARSER):
                continue
            w = writes[name]
            runs = [(0, len(self.template))] if w is None else _slot_ranges(set(w))
            copies = " ".join(f"memcpy(to + {lo}, from + {lo}, {n} * sizeof(v_t));" for lo, n in runs)
            lines.append(f"static inline void writes_{name}(v_t *to, const v_t *from) {{ {copies} }}")
        return lines

    def _check_template(self) -> None:
        for i, v in enumerate(self.template):
            if isinstance(v, bool) or (isinstance(v, int) and V_MIN <= v <= V_MAX):
                if isinstance(v, ir.Unset):
                    self.unset_slots.add(i)
                continue
            raise Unsupported(f"a slot that holds {type(v).__name__} (varbit, clone or recirculation state)")

    def _collect_objects(self) -> None:
        """Number every runtime object the code names, and every table's action names."""
        for obj in _objects(self.module).items():
            name, value = obj
            if isinstance(value, Table):
                self._register(self.obj.tables, value, name)
            elif isinstance(value, Register):
                self._register(self.obj.registers, value, name)
            elif isinstance(value, Counter):
                self._register(self.obj.counters, value, name)
            elif isinstance(value, ValueSet):
                self._register(self.obj.value_sets, value, name)
            elif isinstance(value, Meter):
                raise Unsupported("meters")
        for t in self.obj.tables:
            if getattr(t, "profile", None) is not None:
                raise Unsupported(f"table {t.name}: an action profile or selector (implementation = ...)")
            for k in t.keys:
                if k.width > 64:
                    raise Unsupported(f"table {t.name}: a key of {k.width} bits")
            for spec in t.actions.values():
                if any(w > 64 for _, w in spec.params):
                    raise Unsupported(f"table {t.name}: action data wider than 64 bits")
                if spec.name not in self.obj.actions:
                    self.obj.actions.append(spec.name)
                action = self.functions.get(spec.fn.__name__)
                if action is None or action.kind is not ir.Kind.ACTION:
                    raise Unsupported(f"action {spec.name} has no source")
        for r in self.obj.registers:
            for ft in _cell_fields(r.elem):
                if not (ft is BOOL or (isinstance(ft, BitsT) and ft.width <= 64)):
                    raise Unsupported(f"register {r.name} of {ft}")
        for vs in self.obj.value_sets:
            if any(w > 64 for w in vs.widths):
                raise Unsupported(f"value set {vs.name} wider than 64 bits")

    def _bank(self) -> None:
        """Registers that come one after another with the same scalar element type and size (a program's
        value lanes, lane0 .. laneN) share one array, ``[size][K]``: a packet's K cells of one index are
        adjacent (one cache line or two, not K pages), and a run of lane statements can become one loop
        (``_rolled``).  Each register stays a column of it for the control plane (engine.py)."""
        def kind(reg: Register) -> tuple[str, int] | None:
            return None if isinstance(reg.elem, HeaderT) else (repr(reg.elem), reg.size)

        regs = self.obj.registers
        first = 0
        for i in range(1, len(regs) + 1):
            if i < len(regs) and kind(regs[i]) is not None and kind(regs[i]) == kind(regs[first]):
                continue
            if i - first >= 2:
                self.banks.append((first, i - first))
                for col in range(i - first):
                    self.bank_of[first + col] = (first, col, i - first)
            first = i

    def _cell(self, rid: int, index: str, column: str | None = None) -> str:
        """Register ``rid``'s scalar cell at ``index`` (C): in its bank's row, or in its own array;
        ``column`` (C) stands for its column in the bank (a re-rolled loop's)."""
        bank = self.bank_of.get(rid)
        if bank is None:
            return f"((int64_t *)ctx->reg[{rid}])[{index}]"
        first, col, width = bank
        return f"((int64_t *)ctx->reg[{first}])[({index}) * {width} + {column if column is not None else col}]"

    def _register(self, into: list, obj: Any, name: str) -> None:
        if id(obj) not in self._ids:
            self._ids[id(obj)] = len(into)
            self.names[id(obj)] = name
            into.append(obj)

    def _object(self, o: ir.Expr, kind: type) -> tuple[Any, int]:
        if not (isinstance(o, ir.Obj) and isinstance(o.value, kind)):
            raise Unsupported(f"{_py(o)} is not a {kind.__name__}")
        return o.value, self._ids[id(o.value)]

    def _find_unset_slots(self) -> None:
        """Slots that may hold TNA's UNSET: the template's, and what plain copies carry it to
        (a copy moves the object, arithmetic turns it into 0).  Reads of them other than
        copies see 0."""
        if not self.unset_slots:
            return
        copies: list[tuple[int, int, int]] = []  # (dst, src, length)
        for node in _module_nodes(self.module):
            if isinstance(node, ir.Assign):
                dst, src = node.target, node.value
                if isinstance(dst, ir.Slot) and isinstance(src, ir.Slot):
                    d1, s1 = _int_const(dst.index), _int_const(src.index)
                    if d1 is not None and s1 is not None:
                        copies.append((d1, s1, 1))
                d2, s2 = _const_slots(dst), _const_slots(src)
                if d2 is not None and s2 is not None:
                    copies.append((d2[0], s2[0], d2[1]))
        changed = True
        while changed:
            changed = False
            for dst, src, n in copies:
                for i in range(n):
                    if src + i in self.unset_slots and dst + i not in self.unset_slots:
                        self.unset_slots.add(dst + i)
                        changed = True

    # ================================================================ functions
    def _prototype(self, fn: ir.Function) -> str:
        if fn.kind is ir.Kind.PARSER:
            return f"static long {fn.name}(ctx_t *ctx, v_t *S, const uint8_t *data, long data_len, int *err)"
        if fn.kind is ir.Kind.DEPARSER:
            return f"static void {fn.name}(ctx_t *ctx, v_t *S, outbuf_t *OUT)"
        if fn.kind is ir.Kind.APPLY:
            return f"static long {fn.name}(ctx_t *ctx, v_t *S)"
        if fn.kind is ir.Kind.ACTION:
            params = "".join(f", v_t {v.name}" for v in fn.data)
            return f"static void {fn.name}(ctx_t *ctx, v_t *S{params})"
        return f"static void {fn.name}(ctx_t *ctx, v_t *S)"

    def _function(self, ir_fn: ir.Function) -> str:
        fn = self.fn = _Function(ir_fn, frozenset(v.name for v in ir_fn.data))
        self._declare_locals(fn)
        self._uses = reroll.var_uses(ir_fn.body, fn.locals)
        body = self._block(ir_fn.body, 1)
        named = set(_C_NAME.findall("\n".join(body)))  # a re-rolled loop names only its first group's locals
        decls = ["    " + d + ";" for name, d in fn.locals.items() if name in named]
        decls += [f"    uint8_t _pb{i}[{size}];" for i, size in enumerate(self._buffer_sizes)]
        self._buffer_sizes = []
        tail = []
        if fn.kind is ir.Kind.APPLY:
            tail = ["    return 0;"]
        elif fn.kind is ir.Kind.PARSER:
            tail = ["    *err = 0;", "    return 0;"]
        out = [self._prototype(ir_fn) + " {", *decls, *body, *tail, "}", ""]
        self.fn = None
        return "\n".join(out)

    def _declare_locals(self, fn: _Function) -> None:
        """The locals the body assigns, typed by their VarKind: a value, a table entry (its row),
        a row of slots (an array as long as the Slots it copies), or the bytes a ``PacketInt``
        reads (a pointer and a length: its fields are read with shifts and masks)."""
        assigned: dict[str, ir.Var] = {}
        for node in _walk(fn.fn.body):
            target, value = None, None
            if isinstance(node, ir.Assign):
                target, value = node.target, node.value
            elif isinstance(node, ir.AugAssign):
                target = node.target
            elif isinstance(node, ir.ForRange):
                target = node.var
            if not isinstance(target, ir.Var) or target.name in fn.params:
                continue
            if assigned.setdefault(target.name, target).kind is not target.kind:
                raise Unsupported(f"the local {target.name} used as both {target.kind.value} "
                                  f"and {assigned[target.name].kind.value}")
            if target.kind is ir.VarKind.ROW and isinstance(value, ir.Slots):
                fn.arrays[target.name] = max(fn.arrays.get(target.name, 0), value.n)
            elif target.kind is ir.VarKind.VALUE and isinstance(value, ir.PacketInt):
                fn.bitbufs.add(target.name)
        for name, var in assigned.items():
            if var.kind is ir.VarKind.ANY:
                raise Unsupported(f"the local {name}, a Python value")
            if var.kind is ir.VarKind.ENTRY:
                fn.locals[name] = f"int32_t {name}"
            elif var.kind is ir.VarKind.ROW:
                if name not in fn.arrays:
                    raise Unsupported(f"the row {name}, never assigned slots")
                fn.locals[name] = f"v_t {name}[{max(fn.arrays[name], 1)}]"
            elif name in fn.bitbufs:
                fn.locals[name] = f"const uint8_t *{name}"
                fn.locals[name + "_n"] = f"long {name}_n"  # its length, set with it
            else:
                fn.locals[name] = f"v_t {name}"

    # ================================================================ statements
    def _block(self, stmts: list[ir.Stmt], depth: int) -> list[str]:
        """A block's lines; each run of unrolled groups (reroll.py) becomes one loop."""
        runs = {} if len(stmts) < reroll.MIN_STATEMENTS else {
            r.start: r for r in reroll.find_runs(stmts, self._bank_column, frozenset(self.unset_slots), self._uses)}
        out: list[str] = []
        i = 0
        while i < len(stmts):
            lines = self._loop(stmts, runs[i], depth) if i in runs else None
            if lines is None:
                lines = self.stmt(stmts[i], depth)
                i += 1
            else:
                i += runs[i].size * runs[i].count
            out += ["    " * depth + line for line in lines]
        return out

    def _bank_column(self, reg: Any) -> tuple[int, int] | None:
        """A register's bank (its first register) and column, or None."""
        bank = self.bank_of.get(self._ids[id(reg)]) if isinstance(reg, Register) else None
        return None if bank is None else (bank[0], bank[1])

    def _loop(self, stmts: list[ir.Stmt], run: reroll.Run, depth: int) -> list[str] | None:
        """``run``'s groups as a C loop over group 0's statements, or None if those are not covered
        with a loop counter in them (the statements unrolled then say why, if they are not covered either)."""
        n = self._fresh()
        loop = f"_roll{n}"
        rolled = reroll.rolled(stmts, run, loop, self._bank_column)
        fixed = reroll.fixed_slots(rolled, run.count)
        named, written = ([], set()) if fixed is None or self.unset_slots.intersection(fixed[0]) else fixed
        outer = {k: self._slot_name(k) for k in named}
        handlers = len(self.fn.handlers)
        self.cached.update({k: f"_s{k}_{n}" for k in named})
        try:
            body = ["    " + line for line in self._sub(rolled, depth)]
        except Unsupported:
            del self.fn.handlers[handlers:]
            return None
        finally:
            self.cached.update(outer)
            for k, name in outer.items():
                if name.startswith("S["):
                    del self.cached[k]
        self.fn.locals[loop] = f"long {loop}"
        return ["{", *(f"    v_t _s{k}_{n} = {outer[k]};" for k in named),
                f"    for ({loop} = 0; {loop} < {run.count}; {loop}++) {{", *body, "    }",
                *(f"    {outer[k]} = _s{k}_{n};" for k in named if k in written), "}"]

    def _sub(self, stmts: list[ir.Stmt], depth: int) -> list[str]:
        """A nested block's lines, re-indented to sit one level deeper than ``depth``."""
        return [line[4 * depth:] for line in self._block(stmts, depth + 1)]

    def stmt(self, s: ir.Stmt, depth: int) -> list[str]:
        m = getattr(self, "_s_" + type(s).__name__, None)
        if m is None:
            raise Unsupported(f"the statement {_py(s)}")
        return m(s, depth)

    def _s_Pass(self, s: ir.Pass, depth: int) -> list[str]:
        return [";"]

    def _s_Comment(self, s: ir.Comment, depth: int) -> list[str]:
        return []

    def _s_Break(self, s: ir.Break, depth: int) -> list[str]:
        return ["break;"]

    def _s_Continue(self, s: ir.Continue, depth: int) -> list[str]:
        return ["continue;"]

    def _s_If(self, s: ir.If, depth: int) -> list[str]:
        out = [f"if ({self.expr(s.cond)}) {{", *self._sub(s.then, depth), "}"]
        if s.other:
            out[-1] = "} else {"
            out += [*self._sub(s.other, depth), "}"]
        return out

    def _s_Loop(self, s: ir.Loop, depth: int) -> list[str]:
        return ["for (;;) {", *self._sub(s.body, depth), "}"]

    def _s_ForRange(self, s: ir.ForRange, depth: int) -> list[str]:
        var = self.lvalue(s.var)
        n = self._fresh()
        head = [f"v_t _end{n} = {self.expr(s.hi)};",
                f"for ({var} = {self.expr(s.lo)}; {var} < _end{n}; {var}++) {{"]
        return ["{", *head, *[("    " + x) for x in self._sub(s.body, depth)], "}", "}"]

    def _s_Return(self, s: ir.Return, depth: int) -> list[str]:
        fn = self.fn
        if fn.kind is ir.Kind.PARSER:
            if not (isinstance(s.value, ir.Tuple) and len(s.value.items) == 2):
                raise Unsupported("a parser return without (pos, error)")
            pos, err = s.value.items
            return [f"{{ *err = (int)({self.expr(err)}); return (long)({self.expr(pos)}); }}"]
        if fn.kind is ir.Kind.APPLY:
            if not (isinstance(s.value, ir.Tuple) and len(s.value.items) == 2):
                raise Unsupported("a table apply return without (hit, action)")
            hit, action = s.value.items
            if not isinstance(hit, ir.Const) or not isinstance(action, ir.EntryAction):
                raise Unsupported(f"a table apply returning {_py(s.value)}")
            return [f"return ((long){self._e_EntryAction(action)} << 1) | {int(bool(hit.value))};"]
        if s.value is not None:
            raise Unsupported("a return with a value")
        return ["return;"]

    def _exit_jump(self) -> str:
        """Where an exit that happened here goes: the innermost handler, else the caller."""
        fn = self.fn
        if fn.handlers:
            return f"goto {fn.handlers[-1]};"
        return "{ ctx->exiting = 1; return" + (" 0" if fn.kind in (ir.Kind.APPLY, ir.Kind.PARSER) else "") + "; }"

    def _after_call(self) -> str:
        """A call that may exit: continue the unwinding if it did."""
        fn = self.fn
        if fn.handlers:
            return f"if (ctx->exiting) goto {fn.handlers[-1]};"
        return "if (ctx->exiting) return" + (" 0" if fn.kind in (ir.Kind.APPLY, ir.Kind.PARSER) else "") + ";"

    def _s_TryExit(self, s: ir.TryExit, depth: int) -> list[str]:
        n = self._fresh()
        label, end = f"_exit{n}", f"_done{n}"
        self.fn.handlers.append(label)
        body = self._sub(s.body, depth)
        self.fn.handlers.pop()
        handler = self._sub(s.handler, depth)
        return ["{", *body, f"goto {end};", "}", f"{label}:", "ctx->exiting = 0;", "{", *handler, "}", f"{end}:;"]

    def _s_Raise(self, s: ir.Raise, depth: int) -> list[str]:
        if s.exc is None or s.exc is ir.Exc.EXIT:  # a re-raise (in a handler) goes on to the next
            return [self._exit_jump()]
        reason = _DROPS.get(s.exc)
        if reason is None:
            raise Unsupported(f"the statement {_py(s)}")
        return [f"drop_packet(ctx, {reason});"]

    def _apply_fn(self, e: ir.Apply) -> str:
        fn = self.functions.get(e.fn)
        if fn is None or fn.kind is not ir.Kind.APPLY:
            raise Unsupported(f"the call {_py(e)}")
        return e.fn

    def _s_Do(self, s: ir.Do, depth: int) -> list[str]:
        if isinstance(s.value, ir.Apply):
            return [f"{self._apply_fn(s.value)}(ctx, S);", self._after_call()]
        raise Unsupported(f"the call {_py(s.value)}")

    def _s_RunAction(self, s: ir.RunAction, depth: int) -> list[str]:
        entry = s.entry.name
        table = self.fn.entry_table.get(entry)
        if table is None:
            raise Unsupported("an action call on an unknown entry")
        return [f"dispatch{table}(ctx, S, &ctx->tables[{table}], {entry});", self._after_call()]

    def _s_AugAssign(self, s: ir.AugAssign, depth: int) -> list[str]:
        op = _C_OPS.get(s.op)
        if op is None:
            raise Unsupported(f"the augmented assignment {_py(s)}")
        t = s.target
        value = self.expr(s.value)
        if isinstance(t, ir.CounterCell):
            _, cid = self._object(t.counter, Counter)
            if t.which not in ("packets", "bytes"):
                raise Unsupported(f"the counter cell {_py(t)}")
            arr = "cnt_packets" if t.which == "packets" else "cnt_bytes"
            return [f"ctx->{arr}[{cid}][(long)({self.expr(t.index)})] {op}= (int64_t)({value});"]
        if isinstance(t, ir.EntryCount):
            entry = t.entry.name
            table = self.fn.entry_table.get(entry)
            if table is None or t.which not in (0, 1):
                raise Unsupported("a counter update on an unknown entry")
            return [f"if (ctx->tables[{table}].slot[{entry}] >= 0) "
                    f"ctx->tables[{table}].counters[2 * ctx->tables[{table}].slot[{entry}] + {t.which}] {op}= "
                    f"(int64_t)({value});"]
        if isinstance(t, ir.Slot) and _int_const(t.index) in self.unset_slots:  # UNSET reads as 0
            return [f"S[{_int_const(t.index)}] = ({self._slot_read(_int_const(t.index))} {op} {value});"]
        return [f"{self.lvalue(t)} {op}= {value};"]

    def _s_Assign(self, s: ir.Assign, depth: int) -> list[str]:
        t, v = s.target, s.value
        fn = self.fn
        if isinstance(t, ir.Var):
            if t.kind is ir.VarKind.ENTRY:
                return self._assign_entry(t, v)
            if t.name in fn.bitbufs:
                if not isinstance(v, ir.PacketInt):
                    raise Unsupported(f"the packet bytes {t.name} assigned {_py(v)}")
                return [f"{t.name} = data + (long)({self.expr(v.pos)}); {t.name}_n = {self.expr(v.n)};"]
            if t.name in fn.arrays:
                if not isinstance(v, ir.Slots):
                    raise Unsupported(f"the row {t.name} assigned {_py(v)}")
                if self.unset_slots:
                    raise Unsupported("a stack shift in a program with TNA's intrinsic metadata")
                return [f"memcpy({t.name}, S + {self._slot_number(v.lo)}, {v.n} * sizeof(v_t));"]
        if isinstance(t, ir.Slots):
            return self._assign_slots(t, v)
        if isinstance(t, (ir.RegCell, reroll.LoopCell)):
            return self._assign_cell(t, v)
        if isinstance(t, ir.Slot) and isinstance(v, ir.Slot) and _int_const(v.index) is not None:
            return [f"{self.lvalue(t)} = {self._slot_name(_int_const(v.index))};"]  # a copy moves UNSET as it is
        return [f"{self.lvalue(t)} = {self.expr(v)};"]

    def _assign_entry(self, t: ir.Var, v: ir.Expr) -> list[str]:
        """A table entry: the row a lookup found (-1: none), the default (row n) or another entry."""
        fn = self.fn
        if isinstance(v, ir.TableLookup):
            _, tid = self._object(v.table, Table)
            fn.entry_table[t.name] = tid
            if not v.keys:
                return [f"{t.name} = -1;"]
            ks = ", ".join(f"(uint64_t)({self.expr(k)})" for k in v.keys)
            n = self._fresh()
            return [f"{{ uint64_t _key{n}[{len(v.keys)}] = {{{ks}}}; "
                    f"{t.name} = table_lookup(&ctx->tables[{tid}], _key{n}); }}"]
        if isinstance(v, ir.DefaultEntry):
            _, tid = self._object(v.table, Table)
            fn.entry_table[t.name] = tid
            return [f"{t.name} = ctx->tables[{tid}].n;"]
        if isinstance(v, ir.Var) and v.kind is ir.VarKind.ENTRY and v.name in fn.entry_table:
            fn.entry_table[t.name] = fn.entry_table[v.name]
            return [f"{t.name} = {v.name};"]
        raise Unsupported(f"{t.name} = {_py(v)}")

    def _assign_cell(self, t: ir.RegCell | reroll.LoopCell, v: ir.Expr) -> list[str]:
        """A register write: a cell, or a struct register's cell field by field from its slots."""
        reg, rid = self._object(t.reg, Register)
        index = f"(long)({self.expr(t.index)})"
        if isinstance(t, reroll.LoopCell):
            return [f"{self._cell(rid, index, self._loop_column(t))} = (int64_t)({self._low64(v)});"]
        if isinstance(reg.elem, HeaderT):
            w = len(_cell_fields(reg.elem))
            src = _const_slots(v.slots) if isinstance(v, ir.SlotsTuple) else None
            if src is None or src[1] != w:
                raise Unsupported("a struct register written from something other than its slots")
            return [f"((int64_t *)ctx->reg[{rid}])[{index} * {w} + {i}] = (int64_t)(S[{src[0] + i}]);"
                    for i in range(w)]
        return [f"{self._cell(rid, index)} = (int64_t)({self._low64(v)});"]

    def _assign_slots(self, t: ir.Slots, v: ir.Expr) -> list[str]:
        lo, n = self._slot_number(t.lo), t.n
        if isinstance(v, ir.Slots):
            if v.n != n:
                raise Unsupported("a slice copy of unequal lengths")
            return [f"memmove(S + {lo}, S + {self._slot_number(v.lo)}, {n} * sizeof(v_t));"] if n else []
        if isinstance(v, ir.RowPart):
            if v.row.name not in self.fn.arrays or v.hi - v.lo != n:
                raise Unsupported(f"a slice assignment from {_py(v)}")
            return [f"memcpy(S + {lo}, {v.row.name} + {v.lo}, {v.hi - v.lo} * sizeof(v_t));"]
        if isinstance(v, ir.Unpack) and lo.isdigit():
            return self._unpack_loops(int(lo), v, n)
        values = self._slot_values(v, n)
        if lo.isdigit():
            return [f"S[{int(lo) + i}] = {x};" for i, x in enumerate(values)]
        d = f"_d{self._fresh()}"
        return ["{", f"    v_t *{d} = S + {lo};", *(f"    {d}[{i}] = {x};" for i, x in enumerate(values)), "}"]

    @staticmethod
    def _unpack_codes(v: ir.Unpack, n: int) -> list[tuple[str, int]]:
        """An unpack's fields: (struct code, byte offset)."""
        st = v.struct.value if isinstance(v.struct, ir.Obj) else None
        if not isinstance(st, struct.Struct):
            raise Unsupported("unpack_from on something other than a struct")
        codes = st.format.lstrip("><!=")
        if len(codes) != n:
            raise Unsupported("a struct unpacked into a slice of another size")
        return _offsets(codes)

    def _unpack_loops(self, lo: int, v: ir.Unpack, n: int) -> list[str]:
        """A header's fields into slots lo.., big-endian; a run of fields of one type (a value array) as a loop."""
        pos = self.expr(v.pos)
        out = []
        for first, count, code, off in _code_runs(self._unpack_codes(v, n)):
            size, signed = _STRUCT_SIZES[code.lower()], int(code.islower())
            if count == 1:
                out.append(f"S[{lo + first}] = load_be(data + (long)({pos}) + {off}, {size}, {signed});")
            else:
                i = f"_f{self._fresh()}"
                out.append(f"UNROLL_FIELDS for (long {i} = 0; {i} < {count}; {i}++) S[{lo + first} + {i}] = "
                           f"load_be(data + (long)({pos}) + {off} + {size} * {i}, {size}, {signed});")
        return out

    def _slot_values(self, v: ir.Expr, n: int) -> list[str]:
        """The values a tuple, a struct unpack or a struct register cell puts in n slots."""
        if isinstance(v, ir.Tuple) and len(v.items) == n:
            return [self.expr(e) for e in v.items]
        if isinstance(v, ir.Unpack):
            pos = self.expr(v.pos)
            return [f"load_be(data + (long)({pos}) + {off}, {_STRUCT_SIZES[code.lower()]}, {int(code.islower())})"
                    for code, off in self._unpack_codes(v, n)]
        if isinstance(v, ir.RegCell):
            reg, rid = self._object(v.reg, Register)
            fields = _cell_fields(reg.elem)
            if not isinstance(reg.elem, HeaderT) or len(fields) != n:
                raise Unsupported("a struct register read into a slice of another size")
            index = f"(long)({self.expr(v.index)})"
            return [_cell_read(f"((int64_t *)ctx->reg[{rid}])[{index} * {n} + {i}]", ft) for i, ft in enumerate(fields)]
        raise Unsupported(f"a slice assignment from {_py(v)}")

    def _s_Emit(self, s: ir.Emit, depth: int) -> list[str]:
        """The deparser's output: a header's fields, big-endian."""
        arg = s.value
        n = self._fresh()
        if isinstance(arg, ir.Pack):
            st = arg.struct.value if isinstance(arg.struct, ir.Obj) else None
            rng = _const_slots(arg.slots)
            if not isinstance(st, struct.Struct) or rng is None:
                raise Unsupported("a header packed from something other than its slots")
            self._emits(st.size)
            out = [f"{{ uint8_t *_o{n} = out_reserve(ctx, OUT, {st.size});"]
            for first, count, code, off in _code_runs(_offsets(st.format.lstrip("><!="))):
                size = _STRUCT_SIZES[code.lower()]
                if count == 1:
                    out.append(f"  store_be(_o{n} + {off}, {size}, S[{rng[0] + first}]);")
                else:  # a run of fields of one type (a value array) as a loop
                    out.append(f"  UNROLL_FIELDS for (long _f{n} = 0; _f{n} < {count}; _f{n}++) "
                               f"store_be(_o{n} + {off} + {size} * _f{n}, {size}, S[{rng[0] + first} + _f{n}]);")
            return out + ["}"]
        if isinstance(arg, ir.ToBytes):
            size = _int_const(arg.n)
            if size is None:
                raise Unsupported("to_bytes of a run-time length")
            self._emits(size)
            out = [f"{{ uint8_t *_o{n} = out_zero(ctx, OUT, {size});"]
            terms = list(self._or_terms(arg.value))
            for i, (value, shift, width) in enumerate(terms):
                alone = all(s2 + w2 <= shift or shift + width <= s2 for j, (_, s2, w2) in enumerate(terms) if j != i)
                if alone and shift % 8 == 0 and width % 8 == 0 and shift + width <= 8 * size:  # whole bytes: a store
                    out.append(f"  store_be(_o{n} + {size - (shift + width) // 8}, {width // 8}, {value});")
                else:
                    out.append(f"  put_bits(_o{n}, {size}, {shift}, {width}, {value});")
            return out + ["}"]
        raise Unsupported(f"deparser output {_py(arg)}")

    def _emits(self, size: int) -> None:
        self.emitted[self.fn.name] = self.emitted.get(self.fn.name, 0) + size

    def _or_terms(self, e: ir.Expr) -> Iterator[tuple[str, int, int]]:
        """``(a & m1) << s1 | (b & m2) << s2 | ...`` -> (a, s1, width of m1), ..."""
        if isinstance(e, ir.Bin) and e.op == "|":
            yield from self._or_terms(e.a)
            yield from self._or_terms(e.b)
            return
        shift, inner = 0, e
        if isinstance(inner, ir.Bin) and inner.op == "<<" and _int_const(inner.b) is not None:
            shift, inner = _int_const(inner.b), inner.a
        if isinstance(inner, ir.Bin) and inner.op == "&" and _mask_width(inner.b):
            yield self.expr(inner.a), shift, _mask_width(inner.b)
            return
        raise Unsupported(f"a header field {_py(e)} without its mask")

    # ================================================================ expressions
    def _fresh(self) -> int:
        self.counter += 1
        return self.counter

    def _slot_number(self, e: ir.Expr) -> str:
        k = _int_const(e)
        return str(k) if k is not None else f"(long)({self.expr(e)})"

    def lvalue(self, t: ir.Expr) -> str:
        if isinstance(t, ir.Var):
            if t.name in self.fn.locals and t.name not in self.fn.bitbufs and t.name not in self.fn.arrays \
                    and t.kind is ir.VarKind.VALUE:
                return t.name
            raise Unsupported(f"an assignment to {t.name}")
        if isinstance(t, ir.Slot):
            k = _int_const(t.index)
            return self._slot_name(k) if k is not None else f"S[(long)({self.expr(t.index)})]"
        if isinstance(t, reroll.LoopSlot):
            return self._e_LoopSlot(t)
        raise Unsupported(f"an assignment to {_py(t)}")

    def expr(self, e: ir.Expr) -> str:
        m = getattr(self, "_e_" + type(e).__name__, None)
        if m is None:
            raise Unsupported(f"the expression {_py(e)}")
        return m(e)

    # what only the Python executor runs, named as the Python names it
    def _e_Name(self, e: ir.Name) -> str:
        raise Unsupported(f"the name {e.name}")

    def _e_Item(self, e: ir.Item) -> str:
        raise Unsupported(f"the subscript {_py(e)}")

    def _e_MethodCall(self, e: ir.MethodCall) -> str:
        raise Unsupported(f"the call {_py(e)}")

    def _e_Const(self, e: ir.Const) -> str:
        v = e.value
        if isinstance(v, (bool, int)):
            return c_int(v)
        if isinstance(v, str) and v in self.obj.actions:
            return c_int(self.obj.action_id(v))
        raise Unsupported(f"the constant {v!r}")

    def _e_Var(self, e: ir.Var) -> str:
        fn = self.fn
        if e.name in fn.params:
            return e.name
        if e.name in fn.locals:
            if e.name in fn.bitbufs or e.name in fn.arrays or e.kind is not ir.VarKind.VALUE:
                raise Unsupported(f"{e.name} used as a number")
            return e.name
        raise Unsupported(f"the name {e.name}")

    def _e_PacketLength(self, e: ir.PacketLength) -> str:
        if self.fn.kind is not ir.Kind.PARSER:
            raise Unsupported("the packet's length outside a parser")
        return "((v_t)data_len)"

    def _slot_name(self, k: int) -> str:
        """Slot k: in S, or in the local a re-rolled loop keeps it in (``_loop``)."""
        return self.cached.get(k) or f"S[{k}]"

    def _slot_read(self, k: int) -> str:
        return f"(S[{k}] == {UNSET_C} ? 0 : S[{k}])" if k in self.unset_slots else self._slot_name(k)

    def _e_Slot(self, e: ir.Slot) -> str:
        k = _int_const(e.index)
        if k is not None:
            return self._slot_read(k)
        return f"S[(long)({self.expr(e.index)})]"

    def _e_LoopSlot(self, e: reroll.LoopSlot) -> str:
        return f"S[{e.base} + {e.step} * {e.loop}]"

    @staticmethod
    def _loop_column(e: reroll.LoopCell) -> str:
        return f"{e.column} + {e.step} * {e.loop}"

    def _e_LoopCell(self, e: reroll.LoopCell) -> str:
        reg, rid = self._object(e.reg, Register)
        return _cell_read(self._cell(rid, f"(long)({self.expr(e.index)})", self._loop_column(e)), reg.elem)

    def _e_Slots(self, e: ir.Slots) -> str:
        raise Unsupported("a slice of S used as a value")

    def _e_RegCell(self, e: ir.RegCell) -> str:
        reg, rid = self._object(e.reg, Register)
        if isinstance(reg.elem, HeaderT):
            raise Unsupported("a struct register cell read as a number")
        return _cell_read(self._cell(rid, f"(long)({self.expr(e.index)})"), reg.elem)

    def _apply_call(self, e: ir.Expr) -> str:
        if not isinstance(e, ir.Apply):
            raise Unsupported(f"the result of {_py(e)}")
        return f"({{ long _r = {self._apply_fn(e)}(ctx, S); {self._after_call()} _r; }})"

    def _e_ApplyHit(self, e: ir.ApplyHit) -> str:
        return f"((v_t)({self._apply_call(e.result)} & 1))"

    def _e_ApplyAction(self, e: ir.ApplyAction) -> str:
        return f"((v_t)({self._apply_call(e.result)} >> 1))"

    def _entry(self, e: ir.Var) -> tuple[str, int]:
        table = self.fn.entry_table.get(e.name) if e.kind is ir.VarKind.ENTRY else None
        if table is None:
            raise Unsupported(f"{e.name} is not a table entry")
        return e.name, table

    def _e_EntryAction(self, e: ir.EntryAction) -> str:
        """The entry's global action id."""
        name, table = self._entry(e.entry)
        return f"ctx->tables[{table}].action[{name}]"

    def _e_IsNone(self, e: ir.IsNone) -> str:
        name, _ = self._entry(e.entry)
        return f"((v_t)(({name} < 0)))"

    def _e_Bin(self, e: ir.Bin) -> str:
        # (PacketInt >> k) & mask and PacketInt & mask: a field of a byte string
        if e.op == "&" and _mask_width(e.b):
            width = _mask_width(e.b)
            inner, shift = e.a, 0
            if isinstance(inner, ir.Bin) and inner.op == ">>" and _int_const(inner.b) is not None:
                inner, shift = inner.a, _int_const(inner.b)
            got = self._field_of_bytes(inner, shift, width)
            if got is not None:
                return got
        w = _sign_extension(e)
        if w is not None:  # int<w>'s wrap-around: the low w bits, sign-extended
            assert isinstance(e.a, ir.Bin) and isinstance(e.a.a, ir.Bin)
            return f"((v_t)((int64_t)({self._low64(e.a.a.a)} << {64 - w}) >> {64 - w}))"
        m = _int_const(e.b)
        if e.op == "&" and m is not None and 0 <= m < 1 << 64:  # a field's mask: 64-bit arithmetic under it
            return f"((v_t)({self._low64(e.a)} & {m}ULL))"
        if e.op in _C_OPS:
            return f"({self.expr(e.a)} {_C_OPS[e.op]} {self.expr(e.b)})"
        k = _int_const(e.b)
        if e.op == "<<":
            if k is not None and 0 <= k < 127:
                return f"((v_t)((u_t)({self.expr(e.a)}) << {k}))"
            return f"v_shl({self.expr(e.a)}, {self.expr(e.b)})"
        if e.op == ">>":
            if k is not None and 0 <= k < 127:
                return f"({self.expr(e.a)} >> {k})"
            return f"v_shr({self.expr(e.a)}, {self.expr(e.b)})"
        if e.op == "//":
            return f"v_div({self.expr(e.a)}, {self.expr(e.b)})"
        if e.op == "%":
            return f"v_mod({self.expr(e.a)}, {self.expr(e.b)})"
        raise Unsupported(f"the operator in {_py(e)}")

    def _low64(self, e: ir.Expr) -> str:
        """e's low 64 bits, as uint64_t: ring operations (``_ring``) in 64 bits, any other value truncated.
        Where only those bits count (under a mask below 2**64, into an int64 register cell), this is exact
        and about half the instructions of __int128, in the lanes' read-add-write above all."""
        k = _int_const(e)
        if k is not None:
            return f"{k & ((1 << 64) - 1)}ULL"
        if not _ring(e):
            return f"((uint64_t)({self.expr(e)}))"
        if isinstance(e, ir.Neg):
            return f"(-{self._low64(e.a)})"
        if isinstance(e, ir.Invert):
            return f"(~{self._low64(e.a)})"
        assert isinstance(e, ir.Bin)
        if e.op == "<<":
            return f"({self._low64(e.a)} << {_int_const(e.b)})"
        return f"({self._low64(e.a)} {_C_OPS[e.op]} {self._low64(e.b)})"

    def _field_of_bytes(self, e: ir.Expr, shift: int, width: int) -> str | None:
        if isinstance(e, ir.Var) and e.name in self.fn.bitbufs:
            return f"get_bits({e.name}, {e.name}_n, {shift}, {width})"
        if isinstance(e, ir.PacketInt):
            return f"get_bits(data + (long)({self.expr(e.pos)}), {self.expr(e.n)}, {shift}, {width})"
        if isinstance(e, ir.Call) and e.fn == "int_of_bytes" and len(e.args) == 1:
            t = self._fresh()
            return (f"({{ bytes_t _b{t} = {self.bytes_expr(e.args[0])}; "
                    f"get_bits(_b{t}.p, _b{t}.n, {shift}, {width}); }})")
        return None

    def _e_Not(self, e: ir.Not) -> str:
        return f"((v_t)!({self.expr(e.a)}))"

    def _e_Neg(self, e: ir.Neg) -> str:
        return f"(-({self.expr(e.a)}))"

    def _e_Invert(self, e: ir.Invert) -> str:
        return f"(~({self.expr(e.a)}))"

    def _e_And(self, e: ir.And) -> str:
        return "((v_t)(" + " && ".join(f"({self.expr(x)})" for x in e.items) + "))"

    def _e_Or(self, e: ir.Or) -> str:
        return "((v_t)(" + " || ".join(f"({self.expr(x)})" for x in e.items) + "))"

    def _e_Cmp(self, e: ir.Cmp) -> str:
        if isinstance(e.a, ir.Slots) and isinstance(e.b, ir.Slots) and e.op in ("==", "!="):
            if self.unset_slots:
                raise Unsupported("a comparison of slices in a program with TNA's intrinsic metadata")
            if e.a.n != e.b.n:
                raise Unsupported("a comparison of slices of unequal lengths")
            eq = f"slots_eq(S + {self._slot_number(e.a.lo)}, S + {self._slot_number(e.b.lo)}, {e.a.n})"
            return f"((v_t)(({eq if e.op == '==' else '!' + eq})))"
        if e.op not in ir.CMP_OPS:
            raise Unsupported(f"the comparison {_py(e)}")
        return f"((v_t)(({self.expr(e.a)} {e.op} {self.expr(e.b)})))"

    def _e_Select(self, e: ir.Select) -> str:
        return f"(({self.expr(e.cond)}) ? ({self.expr(e.then)}) : ({self.expr(e.other)}))"

    def _e_PacketInt(self, e: ir.PacketInt) -> str:
        size = _int_const(e.n)
        if size is None or size > 15:
            raise Unsupported("a number read from more than 15 bytes")
        return f"load_be(data + (long)({self.expr(e.pos)}), {size}, 0)"

    def _e_Call(self, e: ir.Call) -> str:
        name, args = e.fn, e.args
        if len(args) != ir.BUILTINS.get(name, -1):
            raise Unsupported(f"the call {_py(e)}")
        if name in ("min", "max"):
            return f"v_{name}({self.expr(args[0])}, {self.expr(args[1])})"
        if name == "bool":
            return f"((v_t)(({self.expr(args[0])}) != 0))"
        if name == "stack_index":
            return f"stack_index(ctx, {self.expr(args[0])}, {self.expr(args[1])})"
        if name == "csum16":
            arg = args[0]
            if isinstance(arg, ir.Concat) and isinstance(arg.b, ir.Payload):
                return f"csum16_concat({self.bytes_expr(arg.a)}, ctx->payload)"
            return f"csum16({self.bytes_expr(arg)})"
        if name in ("csum_add", "csum_sub"):
            return f"{name}({self.expr(args[0])}, {self.bytes_expr(args[1])})"
        if name == "hash_offset":
            algo = self._hash_name(args[0])
            return f"hash_offset({algo}({self.bytes_expr(args[1])}), {self.expr(args[2])}, {self.expr(args[3])})"
        if name == "int_of_bytes":
            return f"bytes_int({self.bytes_expr(args[0])}, -1)"
        raise Unsupported(f"the call {_py(e)}")

    def _e_Hash(self, e: ir.Hash) -> str:
        if e.data is None:
            raise Unsupported(f"the hash {_py(e)} used as a number")
        return f"{self._hash_name(e)}({self.bytes_expr(e.data)})"

    def _hash_name(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Hash) and e.algo in _HASHES:
            return _HASHES[e.algo]
        raise Unsupported(f"the hash {_py(e)[:40]}")

    def _e_VsetMatches(self, e: ir.VsetMatches) -> str:
        _, vid = self._object(e.vset, ValueSet)
        ks = ", ".join(f"(uint64_t)({self.expr(k)})" for k in e.keys)
        n = self._fresh()
        return (f"({{ uint64_t _vk{n}[{max(len(e.keys), 1)}] = {{{ks}}}; "
                f"(v_t)vset_matches(&ctx->vsets[{vid}], _vk{n}); }})")

    # ---------------------------------------------------------------- byte strings
    def bytes_expr(self, e: ir.Expr) -> str:
        """A C ``bytes_t`` for a byte string (pack_bits, b'', a conditional)."""
        if isinstance(e, ir.Const) and e.value == b"":
            return "bytes_empty()"
        if isinstance(e, ir.Select):
            return f"(({self.expr(e.cond)}) ? {self.bytes_expr(e.then)} : {self.bytes_expr(e.other)})"
        if isinstance(e, ir.Call) and e.fn == "pack_bits" and len(e.args) == 2:
            values, widths = e.args
            if not (isinstance(values, ir.Tuple) and isinstance(widths, ir.Tuple)):
                raise Unsupported("pack_bits of something other than tuples")
            ws = [_int_const(w) for w in widths.items]
            if not all(isinstance(w, int) for w in ws):
                raise Unsupported("pack_bits with a run-time width")
            buf = len(self._buffer_sizes)
            self._buffer_sizes.append(max((sum(ws) + 7) // 8, 1))
            parts = [f"bitwriter_t _w = {{_pb{buf}, 0}};"]
            for v, w in zip(values.items, ws):
                if isinstance(v, ir.Select) and isinstance(v.other, ir.Const) and v.other.value is None:
                    parts.append(f"if ({self.expr(v.cond)}) bw_put(&_w, {self.expr(v.then)}, {w});")
                else:
                    parts.append(f"bw_put(&_w, {self.expr(v)}, {w});")
            return "({ " + " ".join(parts) + " bw_bytes(&_w); })"
        raise Unsupported(f"the byte string {_py(e)}")

    # ================================================================ tables
    def _dispatch(self, table: Table) -> str:
        """Run a table row's action with its action data."""
        tid = self._ids[id(table)]
        lines = [f"static void dispatch{tid}(ctx_t *ctx, v_t *S, const table_t *t, int32_t row) {{",
                 "    const uint64_t *a = t->args + (long)row * t->nargs;",
                 "    (void)a;",
                 "    switch (t->action[row]) {"]
        for spec in table.actions.values():
            args = "".join(f", (v_t)a[{i}]" for i in range(len(spec.params)))
            lines.append(f"    case {self.obj.action_id(spec.name)}: {spec.fn.__name__}(ctx, S{args}); break;")
        lines += ["    }", "}", ""]
        return "\n".join(lines)


def _ring(e: ir.Expr) -> bool:
    """Whether e is an operation whose low 64 bits depend only on its operands' low 64 bits (+ - * & | ^,
    negation, inversion, a left shift by a constant below 64): then it may be computed in 64 bits."""
    if isinstance(e, ir.Bin):
        if e.op in _C_OPS:
            return True
        k = _int_const(e.b)
        return e.op == "<<" and k is not None and 0 <= k < 64
    return isinstance(e, (ir.Neg, ir.Invert))


def _sign_extension(e: ir.Bin) -> int | None:
    """w if e is ``((x + 2**(w-1)) & (2**w - 1)) - 2**(w-1)``, w <= 64 (how the generated code wraps an int<w>):
    x's low w bits sign-extended, which C does with two shifts instead of 128-bit arithmetic."""
    h = _int_const(e.b)
    if e.op != "-" or h is None or h <= 0 or h & (h - 1) or h > 1 << 63:
        return None
    masked = e.a
    if not (isinstance(masked, ir.Bin) and masked.op == "&" and _int_const(masked.b) == 2 * h - 1):
        return None
    added = masked.a
    if isinstance(added, ir.Bin) and added.op == "+" and _int_const(added.b) == h:
        return h.bit_length()
    return None


def _cell_fields(elem: Type) -> list[Type]:
    return list(elem.fields.values()) if isinstance(elem, HeaderT) else [elem]


def _offsets(codes: str) -> list[tuple[str, int]]:
    """A struct's fields: (code, byte offset)."""
    out, off = [], 0
    for code in codes:
        out.append((code, off))
        off += _STRUCT_SIZES[code.lower()]
    return out


def _code_runs(fields: list[tuple[str, int]]) -> list[tuple[int, int, str, int]]:
    """Fields grouped in runs of one code: (first field, how many, code, byte offset of the first)."""
    runs: list[tuple[int, int, str, int]] = []
    for i, (code, off) in enumerate(fields):
        if runs and runs[-1][2] == code:
            first, count, _, at = runs[-1]
            runs[-1] = (first, count + 1, code, at)
        else:
            runs.append((i, 1, code, off))
    return runs


def _cell_read(cell: str, t: Type) -> str:
    """A register cell (int64) as the value the Python list holds."""
    if isinstance(t, BitsT) and not t.signed and t.width == 64:
        return f"((v_t)(uint64_t){cell})"
    return f"((v_t){cell})"


@dataclass(frozen=True)
class Image:
    """A lowering kept for the next switch of the same program: the C, and the names its objects
    go by in the generated namespace (a new switch has new objects under the same names)."""

    source: str
    tables: tuple[str, ...]
    registers: tuple[str, ...]
    counters: tuple[str, ...]
    value_sets: tuple[str, ...]
    actions: tuple[str, ...]
    unset_slots: frozenset[int]
    max_header_bytes: int
    banks: tuple[tuple[int, int], ...]

    def bind(self, ns: dict[str, Any]) -> Lowered:
        """The C bound to the objects ``ns`` (a generated namespace) has under this image's names."""
        objects = Objects([ns[n] for n in self.tables], [ns[n] for n in self.registers],
                          [ns[n] for n in self.counters], [ns[n] for n in self.value_sets], list(self.actions))
        return Lowered(self.source, objects, self.unset_slots, self.max_header_bytes, self.banks)


_CACHE: OrderedDict[tuple, Image | Unsupported] = OrderedDict()
_CACHE_SIZE = 16
_CACHE_LOCK = threading.Lock()


def _shape(obj: Any) -> Any:
    """What the C depends on in one runtime object (None: nothing, lowering never reads it)."""
    if isinstance(obj, Table):
        return ("table", obj.name, tuple((k.width, k.match_kind) for k in obj.keys),
                tuple((a.name, a.fn.__name__, a.params) for a in obj.actions.values()),
                getattr(obj, "profile", None) is None)
    if isinstance(obj, Register):
        return ("register", obj.name, obj.size, isinstance(obj.elem, HeaderT),
                tuple(repr(t) for t in _cell_fields(obj.elem)))
    if isinstance(obj, Counter):
        return ("counter", obj.name)
    if isinstance(obj, ValueSet):
        return ("value set", obj.name, tuple(obj.widths))
    if isinstance(obj, Meter):
        return ("meter",)
    if isinstance(obj, struct.Struct):
        return ("struct", obj.format)
    return None


def _key(module: ir.Module) -> tuple:
    """Everything lowering reads: the module (as its printed Python), the template's values, and
    the shape of every object the module names (and which names are one object): equal keys lower
    to equal C."""
    first: dict[int, str] = {}
    shapes = []
    objects = _objects(module)
    for name in sorted(objects):
        obj = objects[name]
        shape = _shape(obj)
        if shape is not None:
            shapes.append((name, first.setdefault(id(obj), name), shape))
    slots = tuple((type(v).__name__, v if isinstance(v, int) else repr(v)) for v in module.template)
    return python.module(module), slots, tuple(shapes)


def lower(module: ir.Module) -> Lowered:
    """The C for a generated module, bound to the objects it names; raises Unsupported with what
    it cannot lower."""
    return lower_image(module).bind(_objects(module))


def lower_image(module: ir.Module) -> Image:
    """The C for a generated module and the names of the objects it uses; raises Unsupported.

    Every switch of a program lowers the same module, so the C is kept by what it depends on
    (``_key``) and only bound to each switch's objects: a simulated fabric builds hundreds."""
    key = _key(module)
    with _CACHE_LOCK:  # switches of one process may load programs in several threads (gRPC)
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
    if found is None:
        lowering = Lowering(module)
        try:
            done = lowering.lower()
        except Unsupported as e:
            found = e
        else:
            names = [tuple(lowering.names[id(o)] for o in objs) for objs in
                     (done.objects.tables, done.objects.registers, done.objects.counters, done.objects.value_sets)]
            found = Image(done.source, *names, tuple(done.objects.actions), done.unset_slots, done.max_header_bytes,
                          done.banks)
        with _CACHE_LOCK:
            _CACHE[key] = found
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    if isinstance(found, Unsupported):
        raise Unsupported(*found.args)
    return found
