"""Lower the executor's generated Python to C.

``codegen.CodeGen`` is the one place that knows P4 semantics.  What it emits is a small,
regular Python: reads and writes of the state list ``S`` at constant (or bounds-checked)
indexes, integer arithmetic that wraps by explicit masks, ``if``/``while True``/``break``,
``try``/``except ExitBlock`` for P4 ``exit``, and calls on a few runtime objects (tables,
registers, counters, struct packers, hashes).  This module translates that Python statement
by statement into C, so the C runs exactly the operations the Python runs:

* every slot and temporary is a ``v_t`` (``__int128``, built with ``-fwrapv``): bit<W> and
  int<W> values with W <= 64 and every intermediate result the Python forms before masking
  fit, and +, -, *, << wrap modulo 2**128, which the Python's masks make exact;
* ``raise ExitBlock`` becomes a jump to the enclosing handler, or ``ctx->exiting`` for the
  caller to see; the exceptions that drop a packet (stack index, assert, register conflict)
  ``longjmp`` to the packet's entry point;
* runtime objects become arrays in ``ctx`` (runtime.h) that Python owns.

Anything outside that subset raises ``Unsupported`` naming it; the switch then runs the
program in Python, as before.
"""

from __future__ import annotations

import ast
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...frontend.types import BOOL, BitsT, HeaderT, Type
from ..externs import Counter, Meter, Register, ValueSet
from ..tables import Table

V_MIN, V_MAX = -(1 << 127), (1 << 127) - 1
UNSET_C = "((v_t)1 << 126)"  # TNA's unwritten ucast_egress_port: no value a slot can take
_C_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.Gt: ">", ast.LtE: "<=", ast.GtE: ">="}
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


def c_int(v: int | bool) -> str:
    v = int(v)
    if not V_MIN <= v <= V_MAX:
        raise Unsupported(f"the constant {v} does not fit in 128 bits")
    if -(1 << 62) <= v < (1 << 62):
        return f"((v_t){v}LL)"
    u = v & ((1 << 128) - 1)
    return f"((v_t)(((u_t){u >> 64:#x}ULL << 64) | (u_t){u & ((1 << 64) - 1):#x}ULL))"


def _const(node: ast.AST) -> Any:
    return node.value if isinstance(node, ast.Constant) else None


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _mask_width(m: Any) -> int | None:
    """The width w of a mask 2**w - 1."""
    if isinstance(m, int) and not isinstance(m, bool) and m > 0 and m & (m + 1) == 0:
        return m.bit_length()
    return None


def _slot_const(node: ast.AST) -> int | None:
    """S[k] with a constant k."""
    if isinstance(node, ast.Subscript) and _is_name(node.value, "S"):
        k = _const(node.slice)
        if isinstance(k, int) and not isinstance(k, bool):
            return k
    return None


def _slot_slice(node: ast.AST) -> tuple[int, int] | None:
    """S[a:b] with constant bounds."""
    if isinstance(node, ast.Subscript) and _is_name(node.value, "S") and isinstance(node.slice, ast.Slice):
        lo, hi = _const(node.slice.lower), _const(node.slice.upper)
        if isinstance(lo, int) and isinstance(hi, int) and node.slice.step is None:
            return lo, hi
    return None


def _split_const(node: ast.AST) -> tuple[str, int]:
    """``X + c`` -> (X, c); anything else -> (it, 0); X as an AST dump, to compare."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(_const(node.right), int):
        rest, c = _split_const(node.left)
        return rest, c + _const(node.right)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return "", node.value
    return ast.dump(node), 0


def _any_slice(node: ast.AST) -> tuple[ast.AST, int] | None:
    """S[lo:hi] whose length is a constant: (lo, length); lo may be a run-time slot number."""
    if not (isinstance(node, ast.Subscript) and _is_name(node.value, "S") and isinstance(node.slice, ast.Slice)):
        return None
    sl = node.slice
    if sl.lower is None or sl.upper is None or sl.step is not None:
        return None
    (a, x), (b, y) = _split_const(sl.lower), _split_const(sl.upper)
    return (sl.lower, y - x) if a == b else None


@dataclass
class _Function:
    name: str
    kind: str  # parser | control | deparser | action | apply
    node: ast.FunctionDef
    locals: dict[str, str] = field(default_factory=dict)  # name -> C declaration
    entry_table: dict[str, int] = field(default_factory=dict)  # local holding a table row -> table id
    bitbufs: dict[str, str] = field(default_factory=dict)  # local holding int.from_bytes(data[..]) -> its length
    arrays: dict[str, int] = field(default_factory=dict)  # local copy of S[a:b] -> length
    handlers: list[str] = field(default_factory=list)  # enclosing try handlers' labels, innermost last


class Lowering:
    """One program's generated module, lowered; ``lower()`` returns the C."""

    def __init__(self, source: str, ns: dict[str, Any], template: list[Any]) -> None:
        self.ns = ns
        self.template = template
        self.tree = ast.parse(source)
        self.obj = Objects()
        self._ids: dict[int, int] = {}  # id(python object) -> its index in its Objects list
        self.names: dict[int, str] = {}  # id(python object) -> the name it was first found under
        self.unset_slots: set[int] = set()
        self.counter = 0
        self.fn: _Function | None = None
        self.functions: dict[str, _Function] = {}
        self.emitted: dict[str, int] = {}  # deparser -> bytes its appends add up to
        self._buffer_sizes: list[int] = []

    # ================================================================ driver
    def lower(self) -> Lowered:
        self._check_template()
        for node in self.tree.body:
            if not isinstance(node, ast.FunctionDef):
                raise Unsupported(f"module-level {type(node).__name__}")
            self.functions[node.name] = _Function(node.name, self._kind(node), node)
        self._collect_objects()
        self._find_unset_slots()
        bodies = []
        for fn in self.functions.values():
            bodies.append(self._function(fn))
        protos = [self._prototype(fn) + ";" for fn in self.functions.values()]
        dispatch = [self._dispatch(t) for t in self.obj.tables]
        template = ", ".join(f"[{i}] = {UNSET_C if type(v).__name__ == 'Unset' else c_int(v)}"
                             for i, v in enumerate(self.template) if v or type(v).__name__ == "Unset")
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
        source = "\n".join(head + protos + [""] + dispatch + bodies) + "\n"
        return Lowered(source, self.obj, frozenset(self.unset_slots), max(self.emitted.values(), default=0))

    def _check_template(self) -> None:
        for i, v in enumerate(self.template):
            if isinstance(v, bool) or (isinstance(v, int) and V_MIN <= v <= V_MAX):
                if type(v).__name__ == "Unset":
                    self.unset_slots.add(i)
                continue
            raise Unsupported(f"a slot that holds {type(v).__name__} (varbit, clone or recirculation state)")

    @staticmethod
    def _kind(node: ast.FunctionDef) -> str:
        params = [a.arg for a in node.args.args]
        if params == ["S", "data"]:
            return "parser"
        if params == ["S", "OUT"]:
            return "deparser"
        if node.name.startswith("_apply") and params == ["S"]:
            return "apply"
        if node.name.startswith("_act"):
            return "action"
        if params == ["S"]:
            return "control"
        raise Unsupported(f"a generated function {node.name}({', '.join(params)})")

    def _collect_objects(self) -> None:
        """Number every runtime object the code names, and every table's action names."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id in self.ns and node.id.startswith("_"):
                obj = self.ns[node.id]
                if isinstance(obj, Table):
                    self._register(self.obj.tables, obj, node.id)
                elif isinstance(obj, Register):
                    self._register(self.obj.registers, obj, node.id)
                elif isinstance(obj, Counter):
                    self._register(self.obj.counters, obj, node.id)
                elif isinstance(obj, ValueSet):
                    self._register(self.obj.value_sets, obj, node.id)
                elif isinstance(obj, Meter):
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
                if spec.fn.__name__ not in self.functions:
                    raise Unsupported(f"action {spec.name} has no source")
        for r in self.obj.registers:
            for ft in _cell_fields(r.elem):
                if not (ft is BOOL or (isinstance(ft, BitsT) and ft.width <= 64)):
                    raise Unsupported(f"register {r.name} of {ft}")
        for vs in self.obj.value_sets:
            if any(w > 64 for w in vs.widths):
                raise Unsupported(f"value set {vs.name} wider than 64 bits")

    def _register(self, into: list, obj: Any, name: str) -> None:
        if id(obj) not in self._ids:
            self._ids[id(obj)] = len(into)
            self.names[id(obj)] = name
            into.append(obj)

    def _object(self, name: str, kind: type) -> tuple[Any, int]:
        obj = self.ns.get(name)
        if not isinstance(obj, kind):
            raise Unsupported(f"{name} is not a {kind.__name__}")
        return obj, self._ids[id(obj)]

    def _find_unset_slots(self) -> None:
        """Slots that may hold TNA's UNSET: the template's, and what plain copies carry it to
        (a copy moves the object, arithmetic turns it into 0).  Reads of them other than
        copies see 0."""
        if not self.unset_slots:
            return
        copies: list[tuple[int, int, int]] = []  # (dst, src, length)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                dst, src = node.targets[0], node.value
                d1, s1 = _slot_const(dst), _slot_const(src)
                if d1 is not None and s1 is not None:
                    copies.append((d1, s1, 1))
                d2, s2 = _slot_slice(dst), _slot_slice(src)
                if d2 is not None and s2 is not None:
                    copies.append((d2[0], s2[0], d2[1] - d2[0]))
        changed = True
        while changed:
            changed = False
            for dst, src, n in copies:
                for i in range(n):
                    if src + i in self.unset_slots and dst + i not in self.unset_slots:
                        self.unset_slots.add(dst + i)
                        changed = True

    # ================================================================ functions
    def _prototype(self, fn: _Function) -> str:
        if fn.kind == "parser":
            return f"static long {fn.name}(ctx_t *ctx, v_t *S, const uint8_t *data, long data_len, int *err)"
        if fn.kind == "deparser":
            return f"static void {fn.name}(ctx_t *ctx, v_t *S, outbuf_t *OUT)"
        if fn.kind == "apply":
            return f"static long {fn.name}(ctx_t *ctx, v_t *S)"
        if fn.kind == "action":
            params = "".join(f", v_t {a.arg}" for a in fn.node.args.args[1:])
            return f"static void {fn.name}(ctx_t *ctx, v_t *S{params})"
        return f"static void {fn.name}(ctx_t *ctx, v_t *S)"

    def _function(self, fn: _Function) -> str:
        self.fn = fn
        params = {a.arg for a in fn.node.args.args}
        self._declare_locals(fn, params)
        body = self._block(fn.node.body, 1)
        decls = ["    " + d + ";" for d in fn.locals.values()]
        decls += [f"    uint8_t _pb{i}[{size}];" for i, size in enumerate(self._buffer_sizes)]
        self._buffer_sizes = []
        tail = []
        if fn.kind == "apply":
            tail = ["    return 0;"]
        elif fn.kind == "parser":
            tail = ["    *err = 0;", "    return 0;"]
        out = [self._prototype(fn) + " {", *decls, *body, *tail, "}", ""]
        self.fn = None
        return "\n".join(out)

    def _declare_locals(self, fn: _Function, params: set[str]) -> None:
        for node in ast.walk(fn.node):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.For)):
                targets = [node.target]
            for t in targets:
                if not isinstance(t, ast.Name) or t.id in params or t.id in fn.locals:
                    continue
                value = getattr(node, "value", None)
                if isinstance(node, ast.Assign) and _any_slice(value) is not None:
                    n = _any_slice(value)[1]
                    fn.arrays[t.id] = n
                    fn.locals[t.id] = f"v_t {t.id}[{max(n, 1)}]"
                elif isinstance(node, ast.Assign) and self._bitbuf_length(value) is not None:
                    fn.bitbufs[t.id] = f"{t.id}_n"  # its length, set with it
                    fn.locals[t.id] = f"const uint8_t *{t.id}"
                    fn.locals[t.id + "_n"] = f"long {t.id}_n"
                elif t.id in ("e",):
                    fn.locals[t.id] = "int32_t e"
                elif t.id == "c":
                    fn.locals[t.id] = "int32_t c"
                else:
                    fn.locals[t.id] = f"v_t {t.id}"

    def _bitbuf_length(self, value: ast.AST | None) -> str | None:
        """``int.from_bytes(data[A:A + N], 'big')`` -> the C for N."""
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and _is_name(value.func.value, "int") and value.func.attr == "from_bytes"):
            return None
        arg = value.args[0]
        if not (isinstance(arg, ast.Subscript) and _is_name(arg.value, "data") and isinstance(arg.slice, ast.Slice)):
            return None
        upper = arg.slice.upper
        if isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add) \
                and ast.dump(upper.left) == ast.dump(arg.slice.lower):
            return self.expr(upper.right) if self.fn is not None else "0"
        return None

    # ================================================================ statements
    def _block(self, stmts: list[ast.stmt], depth: int) -> list[str]:
        out: list[str] = []
        for s in stmts:
            out += ["    " * depth + line for line in self.stmt(s, depth)]
        return out

    def _sub(self, stmts: list[ast.stmt], depth: int) -> list[str]:
        """A nested block's lines, re-indented to sit one level deeper than ``depth``."""
        return [line[4 * depth:] for line in self._block(stmts, depth + 1)]

    def stmt(self, s: ast.stmt, depth: int) -> list[str]:
        m = getattr(self, "_s_" + type(s).__name__, None)
        if m is None:
            raise Unsupported(f"the statement {type(s).__name__}")
        return m(s, depth)

    def _s_Pass(self, s: ast.Pass, depth: int) -> list[str]:
        return [";"]

    def _s_Break(self, s: ast.Break, depth: int) -> list[str]:
        return ["break;"]

    def _s_Continue(self, s: ast.Continue, depth: int) -> list[str]:
        return ["continue;"]

    def _s_If(self, s: ast.If, depth: int) -> list[str]:
        out = [f"if ({self.expr(s.test)}) {{", *self._sub(s.body, depth), "}"]
        if s.orelse:
            out[-1] = "} else {"
            out += [*self._sub(s.orelse, depth), "}"]
        return out

    def _s_While(self, s: ast.While, depth: int) -> list[str]:
        if _const(s.test) is not True or s.orelse:
            raise Unsupported("a while loop that is not `while True`")
        return ["for (;;) {", *self._sub(s.body, depth), "}"]

    def _s_For(self, s: ast.For, depth: int) -> list[str]:
        var = s.target.id if isinstance(s.target, ast.Name) else None
        if var is None or s.orelse:
            raise Unsupported("a for loop over more than one name")
        it = s.iter
        n = self._fresh()
        if isinstance(it, ast.Call) and _is_name(it.func, "range") and len(it.args) == 2:
            head = [f"v_t _end{n} = {self.expr(it.args[1])};",
                    f"for ({var} = {self.expr(it.args[0])}; {var} < _end{n}; {var}++) {{"]
        elif isinstance(it, ast.Tuple):
            items = ", ".join(self.expr(e) for e in it.elts)
            head = [f"v_t _items{n}[] = {{{items}}};",
                    f"for (int _j{n} = 0; _j{n} < {len(it.elts)}; _j{n}++) {{",
                    f"    {var} = _items{n}[_j{n}];"]
        else:
            raise Unsupported("a for loop over something other than range() or a tuple")
        return ["{", *head, *[("    " + x) for x in self._sub(s.body, depth)], "}", "}"]

    def _s_Return(self, s: ast.Return, depth: int) -> list[str]:
        fn = self.fn
        if fn.kind == "parser":
            if not (isinstance(s.value, ast.Tuple) and len(s.value.elts) == 2):
                raise Unsupported("a parser return without (pos, error)")
            pos, err = s.value.elts
            return [f"{{ *err = (int)({self.expr(err)}); return (long)({self.expr(pos)}); }}"]
        if fn.kind == "apply":
            if not (isinstance(s.value, ast.Tuple) and len(s.value.elts) == 2):
                raise Unsupported("a table apply return without (hit, action)")
            hit = _const(s.value.elts[0])
            return [f"return ((long){self._entry_action(s.value.elts[1])} << 1) | {int(bool(hit))};"]
        if s.value is not None:
            raise Unsupported("a return with a value")
        return ["return;"]

    def _exit_jump(self) -> str:
        """Where an exit that happened here goes: the innermost handler, else the caller."""
        fn = self.fn
        if fn.handlers:
            return f"goto {fn.handlers[-1]};"
        return "{ ctx->exiting = 1; return" + (" 0" if fn.kind in ("apply", "parser") else "") + "; }"

    def _after_call(self) -> str:
        """A call that may exit: continue the unwinding if it did."""
        fn = self.fn
        if fn.handlers:
            return f"if (ctx->exiting) goto {fn.handlers[-1]};"
        return "if (ctx->exiting) return" + (" 0" if fn.kind in ("apply", "parser") else "") + ";"

    def _s_Try(self, s: ast.Try, depth: int) -> list[str]:
        if s.orelse or s.finalbody or len(s.handlers) != 1 or not _is_name(s.handlers[0].type, "ExitBlock"):
            raise Unsupported("a try statement other than `except ExitBlock`")
        n = self._fresh()
        label, end = f"_exit{n}", f"_done{n}"
        self.fn.handlers.append(label)
        body = self._sub(s.body, depth)
        self.fn.handlers.pop()
        handler = self._sub(s.handlers[0].body, depth)
        return ["{", *body, f"goto {end};", "}", f"{label}:", "ctx->exiting = 0;", "{", *handler, "}", f"{end}:;"]

    def _s_Raise(self, s: ast.Raise, depth: int) -> list[str]:
        exc = s.exc
        if exc is None or _is_name(exc, "ExitBlock"):
            return [self._exit_jump()]
        if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name):
            reason = {"RegisterConflict": "DROP_REGISTER_CONFLICT", "AssertionFailed": "DROP_ASSERT",
                      "LoopLimit": "DROP_LOOP"}.get(exc.func.id)
            if reason:
                return [f"drop_packet(ctx, {reason});"]
        raise Unsupported(f"raise {ast.unparse(exc)}")

    def _s_Expr(self, s: ast.Expr, depth: int) -> list[str]:
        call = s.value
        if not isinstance(call, ast.Call):
            raise Unsupported("an expression statement that is not a call")
        f = call.func
        if isinstance(f, ast.Name) and self.functions.get(f.id, None) is not None \
                and self.functions[f.id].kind == "apply":
            return [f"{f.id}(ctx, S);", self._after_call()]
        if isinstance(f, ast.Attribute) and _is_name(f.value, "OUT") and f.attr == "append":
            return self._out_append(call.args[0])
        if isinstance(f, ast.Attribute) and f.attr == "fn" and isinstance(f.value, ast.Attribute) \
                and isinstance(f.value.value, ast.Name):
            entry = f.value.value.id
            table = self.fn.entry_table.get(entry)
            if table is None:
                raise Unsupported("an action call on an unknown entry")
            return [f"dispatch{table}(ctx, S, &ctx->tables[{table}], {entry});", self._after_call()]
        raise Unsupported(f"the call {ast.unparse(call)[:60]}")

    def _s_AugAssign(self, s: ast.AugAssign, depth: int) -> list[str]:
        op = _C_OPS.get(type(s.op))
        if op is None:
            raise Unsupported(f"the augmented assignment {ast.unparse(s)[:60]}")
        t = s.target
        value = self.expr(s.value)
        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) \
                and t.value.attr in ("packets", "bytes") and isinstance(t.value.value, ast.Name):
            _, cid = self._object(t.value.value.id, Counter)
            arr = "cnt_packets" if t.value.attr == "packets" else "cnt_bytes"
            return [f"ctx->{arr}[{cid}][(long)({self.expr(t.slice)})] {op}= (int64_t)({value});"]
        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == "c":
            which = _const(t.slice)
            table = self.fn.entry_table.get("c")
            if table is None or which not in (0, 1):
                raise Unsupported("a counter update on an unknown entry")
            return [f"if (ctx->tables[{table}].slot[c] >= 0) "
                    f"ctx->tables[{table}].counters[2 * ctx->tables[{table}].slot[c] + {which}] {op}= "
                    f"(int64_t)({value});"]
        return [f"{self.lvalue(t)} {op}= {value};"]

    def _s_Assign(self, s: ast.Assign, depth: int) -> list[str]:
        if len(s.targets) != 1:
            raise Unsupported("a chained assignment")
        t, v = s.targets[0], s.value
        fn = self.fn
        # table lookups and entries
        if isinstance(t, ast.Name) and t.id == "e":
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "lookup":
                _, tid = self._object(v.func.value.id, Table)
                fn.entry_table["e"] = tid
                keys = v.args[0].elts if isinstance(v.args[0], ast.Tuple) else None
                if keys is None:
                    raise Unsupported("a table lookup without a key tuple")
                if not keys:
                    return ["e = -1;"]
                ks = ", ".join(f"(uint64_t)({self.expr(k)})" for k in keys)
                n = self._fresh()
                return [f"{{ uint64_t _key{n}[{len(keys)}] = {{{ks}}}; "
                        f"e = table_lookup(&ctx->tables[{tid}], _key{n}); }}"]
            if isinstance(v, ast.Attribute) and v.attr == "default_entry":
                _, tid = self._object(v.value.id, Table)
                fn.entry_table["e"] = tid
                return [f"e = ctx->tables[{tid}].n;"]
            raise Unsupported(f"e = {ast.unparse(v)[:60]}")
        if isinstance(t, ast.Name) and t.id == "c":
            if isinstance(v, ast.Attribute) and v.attr == "counter" and _is_name(v.value, "e"):
                fn.entry_table["c"] = fn.entry_table["e"]
                return ["c = e;"]
            raise Unsupported(f"c = {ast.unparse(v)[:60]}")
        if isinstance(t, ast.Name) and t.id in fn.bitbufs:
            arg = v.args[0]
            return [f"{t.id} = data + (long)({self.expr(arg.slice.lower)}); {t.id}_n = {self._bitbuf_length(v)};"]
        if isinstance(t, ast.Name) and t.id in fn.arrays:
            lo, n = _any_slice(v)
            if self.unset_slots:
                raise Unsupported("a stack shift in a program with TNA's intrinsic metadata")
            return [f"memcpy({t.id}, S + {self._slot_number(lo)}, {n} * sizeof(v_t));"]
        # slices of S
        dst = _any_slice(t)
        if dst is not None:
            return self._assign_slice(dst, v)
        # register writes
        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and t.value.attr == "cells":
            reg, rid = self._object(t.value.value.id, Register)
            index = f"(long)({self.expr(t.slice)})"
            fields = _cell_fields(reg.elem)
            if isinstance(reg.elem, HeaderT):
                src = _slot_slice(v.args[0]) if isinstance(v, ast.Call) and _is_name(v.func, "tuple") else None
                if src is None or src[1] - src[0] != len(fields):
                    raise Unsupported("a struct register written from something other than its slots")
                w = len(fields)
                return [f"((int64_t *)ctx->reg[{rid}])[{index} * {w} + {i}] = (int64_t)(S[{src[0] + i}]);"
                        for i in range(w)]
            return [f"((int64_t *)ctx->reg[{rid}])[{index}] = (int64_t)({self.expr(v)});"]
        if _slot_const(v) is not None and isinstance(t, ast.Subscript):  # a copy moves UNSET as it is
            return [f"{self.lvalue(t)} = S[{_slot_const(v)}];"]
        return [f"{self.lvalue(t)} = {self.expr(v)};"]

    def _assign_slice(self, dst: tuple[ast.AST, int], v: ast.AST) -> list[str]:
        lo, n = self._slot_number(dst[0]), dst[1]
        src = _any_slice(v)
        if src is not None:
            if src[1] != n:
                raise Unsupported("a slice copy of unequal lengths")
            return [f"memmove(S + {lo}, S + {self._slot_number(src[0])}, {n} * sizeof(v_t));"] if n else []
        if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and v.value.id in self.fn.arrays:
            a, b = _const(v.slice.lower), _const(v.slice.upper)
            return [f"memcpy(S + {lo}, {v.value.id} + {a}, {b - a} * sizeof(v_t));"]
        values = self._slice_values(v, n)
        if lo.isdigit():
            return [f"S[{int(lo) + i}] = {x};" for i, x in enumerate(values)]
        d = f"_d{self._fresh()}"
        return ["{", f"    v_t *{d} = S + {lo};", *(f"    {d}[{i}] = {x};" for i, x in enumerate(values)), "}"]

    def _slice_values(self, v: ast.AST, n: int) -> list[str]:
        """The values a list, a struct unpack or a struct register cell puts in n slots."""
        if isinstance(v, ast.List) and len(v.elts) == n:
            return [self.expr(e) for e in v.elts]
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "unpack_from":
            st = self.ns.get(v.func.value.id)
            if not isinstance(st, struct.Struct):
                raise Unsupported("unpack_from on something other than a struct")
            pos = self.expr(v.args[1])
            out, off = [], 0
            for code in st.format.lstrip("><!="):
                size = _STRUCT_SIZES[code.lower()]
                out.append(f"load_be(data + (long)({pos}) + {off}, {size}, {int(code.islower())})")
                off += size
            return out
        if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Attribute) and v.value.attr == "cells":
            reg, rid = self._object(v.value.value.id, Register)
            fields = _cell_fields(reg.elem)
            if len(fields) != n:
                raise Unsupported("a struct register read into a slice of another size")
            index = f"(long)({self.expr(v.slice)})"
            return [_cell_read(f"((int64_t *)ctx->reg[{rid}])[{index} * {n} + {i}]", ft) for i, ft in enumerate(fields)]
        raise Unsupported(f"a slice assignment from {ast.unparse(v)[:60]}")

    def _out_append(self, arg: ast.AST) -> list[str]:
        """The deparser's ``OUT.append(bytes)``: a header's fields, big-endian."""
        n = self._fresh()
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "pack":
            st = self.ns.get(arg.func.value.id)
            star = arg.args[0] if len(arg.args) == 1 and isinstance(arg.args[0], ast.Starred) else None
            rng = _slot_slice(star.value) if star is not None else None
            if not isinstance(st, struct.Struct) or rng is None:
                raise Unsupported("a header packed from something other than its slots")
            self._emits(st.size)
            out, off = [f"{{ uint8_t *_o{n} = out_reserve(ctx, OUT, {st.size});"], 0
            for i, code in enumerate(st.format.lstrip("><!=")):
                size = _STRUCT_SIZES[code.lower()]
                out.append(f"  store_be(_o{n} + {off}, {size}, S[{rng[0] + i}]);")
                off += size
            return out + ["}"]
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "to_bytes":
            size = _const(arg.args[0])
            if not isinstance(size, int):
                raise Unsupported("to_bytes of a run-time length")
            self._emits(size)
            out = [f"{{ uint8_t *_o{n} = out_zero(ctx, OUT, {size});"]
            for value, shift, width in self._or_terms(arg.func.value):
                out.append(f"  put_bits(_o{n}, {size}, {shift}, {width}, {value});")
            return out + ["}"]
        raise Unsupported(f"deparser output {ast.unparse(arg)[:60]}")

    def _emits(self, size: int) -> None:
        self.emitted[self.fn.name] = self.emitted.get(self.fn.name, 0) + size

    def _or_terms(self, e: ast.AST) -> Iterator[tuple[str, int, int]]:
        """``(a & m1) << s1 | (b & m2) << s2 | ...`` -> (a, s1, width of m1), ..."""
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitOr):
            yield from self._or_terms(e.left)
            yield from self._or_terms(e.right)
            return
        shift = 0
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.LShift) and isinstance(_const(e.right), int):
            shift, e = _const(e.right), e.left
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitAnd) and _mask_width(_const(e.right)):
            yield self.expr(e.left), shift, _mask_width(_const(e.right))
            return
        raise Unsupported(f"a header field {ast.unparse(e)[:60]} without its mask")

    # ================================================================ expressions
    def _fresh(self) -> int:
        self.counter += 1
        return self.counter

    def _slot_number(self, e: ast.AST) -> str:
        k = _const(e)
        return str(k) if isinstance(k, int) else f"(long)({self.expr(e)})"

    def lvalue(self, t: ast.AST) -> str:
        if isinstance(t, ast.Name):
            if t.id in self.fn.locals:
                return t.id
            raise Unsupported(f"an assignment to {t.id}")
        if isinstance(t, ast.Subscript) and _is_name(t.value, "S") and not isinstance(t.slice, ast.Slice):
            k = _const(t.slice)
            return f"S[{k}]" if isinstance(k, int) else f"S[(long)({self.expr(t.slice)})]"
        raise Unsupported(f"an assignment to {ast.unparse(t)[:60]}")

    def expr(self, e: ast.AST) -> str:
        m = getattr(self, "_e_" + type(e).__name__, None)
        if m is None:
            raise Unsupported(f"the expression {ast.unparse(e)[:60]}")
        return m(e)

    def _e_Constant(self, e: ast.Constant) -> str:
        v = e.value
        if isinstance(v, (bool, int)):
            return c_int(v)
        if isinstance(v, str) and v in self.obj.actions:
            return c_int(self.obj.action_id(v))
        raise Unsupported(f"the constant {v!r}")

    def _e_Name(self, e: ast.Name) -> str:
        fn = self.fn
        if e.id in fn.locals or e.id in {a.arg for a in fn.node.args.args[1:]} and fn.kind == "action":
            if e.id in fn.bitbufs or e.id in fn.arrays:
                raise Unsupported(f"{e.id} used as a number")
            return e.id
        if e.id == "L":
            return "data_len"
        raise Unsupported(f"the name {e.id}")

    def _slot_read(self, k: int) -> str:
        return f"(S[{k}] == {UNSET_C} ? 0 : S[{k}])" if k in self.unset_slots else f"S[{k}]"

    def _e_Subscript(self, e: ast.Subscript) -> str:
        if _is_name(e.value, "S"):
            if isinstance(e.slice, ast.Slice):
                raise Unsupported("a slice of S used as a value")
            k = _const(e.slice)
            if isinstance(k, int):
                return self._slot_read(k)
            return f"S[(long)({self.expr(e.slice)})]"
        if isinstance(e.value, ast.Attribute) and e.value.attr == "cells":
            reg, rid = self._object(e.value.value.id, Register)
            if isinstance(reg.elem, HeaderT):
                raise Unsupported("a struct register cell read as a number")
            return _cell_read(f"((int64_t *)ctx->reg[{rid}])[(long)({self.expr(e.slice)})]", reg.elem)
        if isinstance(e.value, ast.Call) and isinstance(e.value.func, ast.Name) \
                and self.functions.get(e.value.func.id) is not None \
                and self.functions[e.value.func.id].kind == "apply":
            which = _const(e.slice)
            call = f"({{ long _r = {e.value.func.id}(ctx, S); {self._after_call()} _r; }})"
            if which == 0:
                return f"((v_t)({call} & 1))"
            if which == 1:
                return f"((v_t)({call} >> 1))"
        raise Unsupported(f"the subscript {ast.unparse(e)[:60]}")

    def _e_BinOp(self, e: ast.BinOp) -> str:
        op = type(e.op)
        # (int.from_bytes(...) >> k) & mask and int.from_bytes(...) & mask: a field of a byte string
        if op is ast.BitAnd and _mask_width(_const(e.right)):
            width = _mask_width(_const(e.right))
            inner, shift = e.left, 0
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.RShift) \
                    and isinstance(_const(inner.right), int):
                inner, shift = inner.left, _const(inner.right)
            got = self._field_of_bytes(inner, shift, width)
            if got is not None:
                return got
        if op in _C_OPS:
            return f"({self.expr(e.left)} {_C_OPS[op]} {self.expr(e.right)})"
        if op is ast.LShift:
            k = _const(e.right)
            if isinstance(k, int) and 0 <= k < 127:
                return f"((v_t)((u_t)({self.expr(e.left)}) << {k}))"
            return f"v_shl({self.expr(e.left)}, {self.expr(e.right)})"
        if op is ast.RShift:
            k = _const(e.right)
            if isinstance(k, int) and 0 <= k < 127:
                return f"({self.expr(e.left)} >> {k})"
            return f"v_shr({self.expr(e.left)}, {self.expr(e.right)})"
        if op is ast.FloorDiv:
            return f"v_div({self.expr(e.left)}, {self.expr(e.right)})"
        if op is ast.Mod:
            return f"v_mod({self.expr(e.left)}, {self.expr(e.right)})"
        raise Unsupported(f"the operator in {ast.unparse(e)[:60]}")

    def _field_of_bytes(self, e: ast.AST, shift: int, width: int) -> str | None:
        if isinstance(e, ast.Name) and e.id in self.fn.bitbufs:
            return f"get_bits({e.id}, {self.fn.bitbufs[e.id]}, {shift}, {width})"
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and _is_name(e.func.value, "int") \
                and e.func.attr == "from_bytes":
            n = self._bitbuf_length(e)
            if n is not None:
                return f"get_bits(data + (long)({self.expr(e.args[0].slice.lower)}), {n}, {shift}, {width})"
            t = self._fresh()
            return (f"({{ bytes_t _b{t} = {self.bytes_expr(e.args[0])}; "
                    f"get_bits(_b{t}.p, _b{t}.n, {shift}, {width}); }})")
        return None

    def _e_UnaryOp(self, e: ast.UnaryOp) -> str:
        v = self.expr(e.operand)
        if isinstance(e.op, ast.Not):
            return f"((v_t)!({v}))"
        if isinstance(e.op, ast.USub):
            return f"(-({v}))"
        if isinstance(e.op, ast.Invert):
            return f"(~({v}))"
        return v

    def _e_BoolOp(self, e: ast.BoolOp) -> str:
        op = " && " if isinstance(e.op, ast.And) else " || "
        return "((v_t)(" + op.join(f"({self.expr(x)})" for x in e.values) + "))"

    def _e_Compare(self, e: ast.Compare) -> str:
        parts = []
        left = e.left
        for op, right in zip(e.ops, e.comparators):
            if isinstance(op, (ast.Is, ast.IsNot)) and _const(right) is None and _is_name(left, "e"):
                parts.append("e < 0" if isinstance(op, ast.Is) else "e >= 0")
            elif type(op) in _CMP:
                a, b = _any_slice(left), _any_slice(right)
                if a is not None and b is not None and type(op) in (ast.Eq, ast.NotEq):
                    if self.unset_slots:
                        raise Unsupported("a comparison of slices in a program with TNA's intrinsic metadata")
                    if a[1] != b[1]:
                        raise Unsupported("a comparison of slices of unequal lengths")
                    eq = f"slots_eq(S + {self._slot_number(a[0])}, S + {self._slot_number(b[0])}, {a[1]})"
                    parts.append(eq if isinstance(op, ast.Eq) else f"!{eq}")
                else:
                    parts.append(f"{self.expr(left)} {_CMP[type(op)]} {self.expr(right)}")
            else:
                raise Unsupported(f"the comparison {ast.unparse(e)[:60]}")
            left = right
        return "((v_t)(" + " && ".join(f"({p})" for p in parts) + "))"

    def _e_IfExp(self, e: ast.IfExp) -> str:
        return f"(({self.expr(e.test)}) ? ({self.expr(e.body)}) : ({self.expr(e.orelse)}))"

    def _e_Call(self, e: ast.Call) -> str:
        f = e.func
        if isinstance(f, ast.Name):
            name, args = f.id, e.args
            if name in ("min", "max") and len(args) == 2:
                return f"v_{name}({self.expr(args[0])}, {self.expr(args[1])})"
            if name == "bool":
                return f"((v_t)(({self.expr(args[0])}) != 0))"
            if name == "len" and _is_name(args[0], "data"):
                return "((v_t)data_len)"
            if name == "stack_index":
                return f"stack_index(ctx, {self.expr(args[0])}, {self.expr(args[1])})"
            if name == "csum16":
                arg = args[0]
                if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) and _is_payload(arg.right):
                    return f"csum16_concat({self.bytes_expr(arg.left)}, ctx->payload)"
                return f"csum16({self.bytes_expr(arg)})"
            if name in ("csum_add", "csum_sub"):
                return f"{name}({self.expr(args[0])}, {self.bytes_expr(args[1])})"
            if name == "hash_offset":
                algo = self._hash_name(args[0])
                return f"hash_offset({algo}({self.bytes_expr(args[1])}), {self.expr(args[2])}, {self.expr(args[3])})"
        if isinstance(f, ast.Subscript) and _is_name(f.value, "HASHES"):
            return f"{self._hash_name(f)}({self.bytes_expr(e.args[0])})"
        if isinstance(f, ast.Attribute) and f.attr == "from_bytes" and _is_name(f.value, "int"):
            n = self._bitbuf_length(e)
            if n is not None:
                size = _const(e.args[0].slice.upper.right)
                if not isinstance(size, int) or size > 15:
                    raise Unsupported("a number read from more than 15 bytes")
                return f"load_be(data + (long)({self.expr(e.args[0].slice.lower)}), {size}, 0)"
            return f"bytes_int({self.bytes_expr(e.args[0])}, -1)"
        if isinstance(f, ast.Attribute) and f.attr == "matches" and isinstance(f.value, ast.Name):
            _, vid = self._object(f.value.id, ValueSet)
            keys = e.args[0].elts
            ks = ", ".join(f"(uint64_t)({self.expr(k)})" for k in keys)
            n = self._fresh()
            return (f"({{ uint64_t _vk{n}[{max(len(keys), 1)}] = {{{ks}}}; "
                    f"(v_t)vset_matches(&ctx->vsets[{vid}], _vk{n}); }})")
        raise Unsupported(f"the call {ast.unparse(e)[:60]}")

    def _hash_name(self, e: ast.AST) -> str:
        if isinstance(e, ast.Subscript) and _is_name(e.value, "HASHES") and _const(e.slice) in _HASHES:
            return _HASHES[_const(e.slice)]
        raise Unsupported(f"the hash {ast.unparse(e)[:40]}")

    def _entry_action(self, e: ast.AST) -> str:
        """``e.action.name`` -> the entry's global action id."""
        if isinstance(e, ast.Attribute) and e.attr == "name" and isinstance(e.value, ast.Attribute) \
                and e.value.attr == "action" and _is_name(e.value.value, "e"):
            return f"ctx->tables[{self.fn.entry_table['e']}].action[e]"
        raise Unsupported(f"the action of {ast.unparse(e)[:40]}")

    # ---------------------------------------------------------------- byte strings
    def bytes_expr(self, e: ast.AST) -> str:
        """A C ``bytes_t`` for a Python bytes expression (pack_bits, b'', a conditional)."""
        if isinstance(e, ast.Constant) and e.value == b"":
            return "bytes_empty()"
        if isinstance(e, ast.IfExp):
            return f"(({self.expr(e.test)}) ? {self.bytes_expr(e.body)} : {self.bytes_expr(e.orelse)})"
        if isinstance(e, ast.Call) and _is_name(e.func, "pack_bits") and len(e.args) == 2:
            values, widths = e.args
            if not (isinstance(values, ast.Tuple) and isinstance(widths, ast.Tuple)):
                raise Unsupported("pack_bits of something other than tuples")
            ws = [_const(w) for w in widths.elts]
            if not all(isinstance(w, int) for w in ws):
                raise Unsupported("pack_bits with a run-time width")
            buf = len(self._buffer_sizes)
            self._buffer_sizes.append(max((sum(ws) + 7) // 8, 1))
            parts = [f"bitwriter_t _w = {{_pb{buf}, 0}};"]
            for v, w in zip(values.elts, ws):
                if isinstance(v, ast.IfExp) and _const(v.orelse) is None and isinstance(v.orelse, ast.Constant):
                    parts.append(f"if ({self.expr(v.test)}) bw_put(&_w, {self.expr(v.body)}, {w});")
                else:
                    parts.append(f"bw_put(&_w, {self.expr(v)}, {w});")
            return "({ " + " ".join(parts) + " bw_bytes(&_w); })"
        raise Unsupported(f"the byte string {ast.unparse(e)[:60]}")

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


def _is_payload(e: ast.AST) -> bool:
    """``PAYLOAD[0]``: the bytes the parser left (v1model's *_with_payload checksums)."""
    return isinstance(e, ast.Subscript) and _is_name(e.value, "PAYLOAD") and _const(e.slice) == 0


def _cell_fields(elem: Type) -> list[Type]:
    return list(elem.fields.values()) if isinstance(elem, HeaderT) else [elem]


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

    def bind(self, ns: dict[str, Any]) -> Lowered:
        objects = Objects([ns[n] for n in self.tables], [ns[n] for n in self.registers],
                          [ns[n] for n in self.counters], [ns[n] for n in self.value_sets], list(self.actions))
        return Lowered(self.source, objects, self.unset_slots, self.max_header_bytes)


_CACHE: OrderedDict[tuple, Image | Unsupported] = OrderedDict()
_CACHE_SIZE = 16
_CACHE_LOCK = threading.Lock()
_NAME = re.compile(r"\b_\w+")


def _shape(obj: Any) -> Any:
    """What the C depends on in one object of the namespace (None: nothing, lowering never reads it)."""
    if isinstance(obj, Table):
        return ("table", obj.name, tuple((k.width, k.match_kind) for k in obj.keys),
                tuple((a.name, a.fn.__name__, a.params) for a in obj.actions.values()),
                getattr(obj, "profile", None) is None)
    if isinstance(obj, Register):
        return ("register", obj.name, isinstance(obj.elem, HeaderT), tuple(repr(t) for t in _cell_fields(obj.elem)))
    if isinstance(obj, Counter):
        return ("counter", obj.name)
    if isinstance(obj, ValueSet):
        return ("value set", obj.name, tuple(obj.widths))
    if isinstance(obj, Meter):
        return ("meter",)
    if isinstance(obj, struct.Struct):
        return ("struct", obj.format)
    return None


def _key(source: str, ns: dict[str, Any], template: list[Any]) -> tuple:
    """Everything lowering reads: the source, the template's values, and the shape of every object
    the source names (and which names are one object): equal keys lower to equal C."""
    first: dict[int, str] = {}
    shapes = []
    for name in sorted(set(_NAME.findall(source)) & ns.keys()):
        obj = ns[name]
        shape = _shape(obj)
        if shape is not None:
            shapes.append((name, first.setdefault(id(obj), name), shape))
    slots = tuple((type(v).__name__, v if isinstance(v, int) else repr(v)) for v in template)
    return source, slots, tuple(shapes)


def lower(source: str, ns: dict[str, Any], template: list[Any]) -> Lowered:
    """The C for a generated module, bound to the objects of ``ns``; raises Unsupported with what
    it cannot lower."""
    return lower_image(source, ns, template).bind(ns)


def lower_image(source: str, ns: dict[str, Any], template: list[Any]) -> Image:
    """The C for a generated module and the names of the objects it uses; raises Unsupported.

    Every switch of a program lowers the same module, so the C is kept by what it depends on
    (``_key``) and only bound to each switch's objects: a simulated fabric builds hundreds."""
    key = _key(source, ns, template)
    with _CACHE_LOCK:  # switches of one process may load programs in several threads (gRPC)
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
    if found is None:
        lowering = Lowering(source, ns, template)
        try:
            done = lowering.lower()
        except Unsupported as e:
            found = e
        else:
            names = [tuple(lowering.names[id(o)] for o in objs) for objs in
                     (done.objects.tables, done.objects.registers, done.objects.counters, done.objects.value_sets)]
            found = Image(done.source, *names, tuple(done.objects.actions), done.unset_slots, done.max_header_bytes)
        with _CACHE_LOCK:
            _CACHE[key] = found
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    if isinstance(found, Unsupported):
        raise Unsupported(*found.args)
    return found
