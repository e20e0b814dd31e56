"""Sub-parsers (P4-16 v1.2.5 "Sub-parsers"), inlined into the one ``parse`` state machine
the way p4c's frontend Inline pass does it, so BMv2's behaviour is matched exactly:

* A state whose statements apply a sub-parser is split there: the first part copies the
  arguments in, runs the callee's local initializers and jumps to a fresh copy of the
  callee's ``start``; the callee's ``accept`` jumps to a new state that copies ``out`` and
  ``inout`` arguments back, then runs the rest of the caller's state and its transition.
  Each apply gets its own copy of the callee's states (so nesting and applying an instance
  twice work); ``reject`` and parser errors end the whole parse as in the caller.
* Arguments: when every apply of an instance passes the same arguments, p4c binds each
  parameter whose argument aliases no other argument to the argument itself (no copy);
  the others use per-instance variables, copied in and out.  The difference shows after
  an error in the sub-parser: a parameter bound to its argument has already written it.
* An ``out`` parameter starts with its headers invalid (p4c's generateResets: header
  validity only, scalars and stack next indexes keep their values).

A pass of code generation (``env.GenEnv``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..frontend import ast
from ..frontend.types import ExternT, HeaderT, StackT
from . import ir
from .storage import Storage, member_storage, slot_count

if TYPE_CHECKING:
    from .env import GenEnv

_SKIP = ("loc", "type", "value", "target", "annotations")


def same_tree(a: Any, b: Any) -> bool:
    """Structural equality of checked expressions (names compare by declaration),
    as p4c's ``equiv`` compares the apply statements of one instance."""
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(
            same_tree(x, y) for x, y in zip(a, b))
    if isinstance(a, ast.Node) or isinstance(b, ast.Node):
        if type(a) is not type(b):
            return False
        for f in dataclasses.fields(a):
            if f.name in _SKIP:
                continue
            x, y = getattr(a, f.name), getattr(b, f.name)
            if f.name == "decl":
                if x is not y:
                    return False
            elif not same_tree(x, y):
                return False
        return True
    return a == b


def apply_sites(parser: ast.ParserDecl, instance: ast.Instantiation) -> list[ast.Call]:
    return [s.call for state in parser.states for s in state.stmts
            if isinstance(s, ast.CallStmt) and s.call.target.kind == "parser_apply"
            and s.call.target.decl is instance]


class SubParserGen:
    """Parser states with sub-parser applies: a pass over ``env``."""

    def __init__(self, env: GenEnv) -> None:
        self.env = env

    def state_body(self, owner: ast.ParserDecl, stmts: list[ast.Stmt], transition: ast.Transition,
                   scope: Any) -> None:
        """A state's statements and transition, split at the first sub-parser apply."""
        for k, s in enumerate(stmts):
            if isinstance(s, ast.CallStmt) and s.call.target.kind == "parser_apply":
                self.sub_parser_call(owner, s.call, scope, stmts[k + 1:], transition)
                return
            self.env.gen.stmt(s, scope)
        self.env.packet.transition(transition, scope)

    def emit_later_states(self) -> None:
        """The states sub-parser applies added, after the parser's own (whose code is
        therefore the same as without sub-parsers)."""
        while self.env.later_states:
            sid, label, ids, body = self.env.later_states.pop(0)
            with self.env.build.elif_(ir.cmp("==", ir.Var("st"), sid)):
                self.env.build.emit(ir.Comment(label))
                saved, self.env.state_ids = self.env.state_ids, ids
                body()
                self.env.state_ids = saved

    def reset_headers(self, st: Any) -> None:
        """p4c's reset of an ``out`` argument: every header in it becomes invalid."""
        t = st.type
        if isinstance(t, StackT):
            k = slot_count(t.elem)
            for i in range(t.size):
                self.reset_headers(Storage(st.base + i * k, t.elem))
        elif isinstance(t, HeaderT) and t.is_header:
            self.env.headers.set_invalid(st)
        elif isinstance(t, HeaderT):
            for name in t.fields:
                self.reset_headers(member_storage(st, name))

    def by_reference(self, owner: ast.ParserDecl, call: ast.Call, params: list[ast.Param], scope: Any) -> set[int]:
        """Which parameters p4c binds to their arguments (see the module docstring)."""
        sites = apply_sites(owner, call.target.decl)
        if any(not same_tree(site.args, call.args) for site in sites):
            return set()
        ranges: dict[int, tuple[int, int] | None] = {}
        for i, (p, a) in enumerate(zip(params, call.args)):
            if isinstance(p.type, ExternT) or isinstance(a, ast.Default):
                continue
            found = None if isinstance(a, ast.Slice) else self.env.calls.lvalue_range(a, scope)
            ranges[i] = found[0] if found is not None and found[0] is not None else None
        chosen = set()
        for i, r in ranges.items():
            if r is None:
                continue
            if not any(j != i and s is not None and s[0] < r[1] and r[0] < s[1] for j, s in ranges.items()):
                chosen.add(i)
        return chosen

    def sub_parser_call(self, owner: ast.ParserDecl, call: ast.Call, scope: Any, rest: list[ast.Stmt],
                        transition: ast.Transition) -> None:
        inst = self.env.gen.lookup(scope, call.target.decl)
        decl: ast.ParserDecl = inst.decl
        direct = self.by_reference(owner, call, decl.params, scope)
        callee = type(scope)(inst.scope)
        copy_out: list[tuple[Any, ast.Expr]] = []
        for i, (p, a, tmp) in enumerate(zip(decl.params, call.args, inst.params)):
            if isinstance(p.type, ExternT):  # the packet_in: shared, so the position moves on
                callee[p] = self.env.gen.lookup(scope, a.decl) if isinstance(a, ast.PathExpr) else "PKT"
            elif isinstance(a, ast.Default):  # '_': p4c passes a fresh variable
                st = self.env.gen.alloc(p.type)
                self.reset_headers(st)
                callee[p] = st
            elif i in direct:
                st = self.env.headers.pin(self.env.gen.storage(a, scope))
                if p.direction == "out":
                    self.reset_headers(st)
                callee[p] = st
            else:
                if p.direction == "out":
                    self.reset_headers(tmp)
                else:
                    self.env.gen.assign_storage(tmp, a, scope)
                if p.direction in ("out", "inout"):
                    copy_out.append((tmp, a))
                callee[p] = tmp
        self.env.gen.init_locals(decl, callee)  # p4c's MoveInitializers: per apply, after the copy-in
        base = self.env.state_count
        ids = {s.name: base + i for i, s in enumerate(decl.states)}
        after = ids["accept"] = base + len(decl.states)
        self.env.state_count = after + 1
        self.env.build.emit(ir.Assign(ir.Var("st"), ir.Const(ids["start"])))
        self.env.build.emit(ir.Continue())
        label = inst.name
        for s in decl.states:
            def body(s: ast.ParserState = s) -> None:
                self.state_body(decl, s.stmts, s.transition, type(scope)(callee))
            self.env.later_states.append((ids[s.name], f"state {label}.{s.name}", ids, body))

        def resume() -> None:
            for tmp, a in copy_out:
                self.env.calls.copy_back(tmp, a, scope)
            self.state_body(owner, rest, transition, scope)
        self.env.later_states.append((after, f"after {label}.apply", self.env.state_ids, resume))
