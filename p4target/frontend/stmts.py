"""Statements (a pass of the checker, env.py): assignments (ordered as p4c orders their parts,
ordering.py), the arms of if and switch, loops, and what may be written.
"""

from __future__ import annotations

from typing import Any

from . import ast, stages
from .anchors import assignment_loc, at_outer, name_loc
from .env import Pass
from .errors import P4Error
from .ordering import order_assignment
from .scope import Scope
from .types import (
    BOOL,
    ERROR,
    INFINT,
    MATCH_KIND,
    STRING,
    VOID,
    ActionRunT,
    BitsT,
    BlockT,
    EnumT,
    ExternT,
    HeaderT,
    StackT,
    Type,
)


class Stmts(Pass):
    """Statements and the values p4c's LocalCopyPropagation follows through them."""

    def var_decl(self, decl: ast.VarDecl, scope: Scope) -> None:
        decl.type = self.env.decls.resolve_type(decl.type_ref)
        if isinstance(decl.type, (ExternT, BlockT)) or decl.type in (VOID, STRING, MATCH_KIND):
            raise P4Error(decl.loc, f"cannot declare a variable of type {decl.type}")
        if decl.type is INFINT:
            raise P4Error(decl.loc, "a variable needs a fixed-width type (int is for constants)")
        if decl.init is not None:
            self.env.exprs.expr(decl.init, scope)
            with at_outer(lambda: name_loc(decl.loc, decl.name), lambda: decl.name):  # p4c: at the declaration ('x')
                self.env.exprs.coerce(decl.init, decl.type, "initializer")
        self.env.divisions.note_write(decl, decl.init)
        scope.declare(decl)

    def stmt(self, s: ast.Stmt, scope: Scope) -> ast.Stmt:
        """Check a statement; returns what the executor runs in its place (``s``, or for an
        assignment a block that orders its parts as p4c does: ordering.py)."""
        if isinstance(s, ast.Block):
            inner = Scope(scope, scope.owner)
            s.stmts = [self.stmt(x, inner) for x in s.stmts]
        elif isinstance(s, ast.Assign):
            lt = self.env.exprs.expr(s.lhs, scope)
            self.lvalue(s.lhs)
            self.env.exprs.expr(s.rhs, scope)
            with at_outer(None if s.compound else lambda: assignment_loc(s.loc),
                          lambda: f"{ast.text(s.lhs)} = {ast.text(s.rhs)}"):
                self.env.exprs.coerce(s.rhs, lt, "assignment")  # p4c: at the assignment ('x = e')
            self.env.divisions.note_write(s.lhs, s.rhs, assigned_op=s.compound)
            return order_assignment(s)
        elif isinstance(s, ast.CallStmt):
            self.env.exprs.expr(s.call, scope)
        elif isinstance(s, ast.If):
            self.env.exprs.expr(s.cond, scope)
            self.env.exprs.coerce(s.cond, BOOL, "if condition")
            s.then, s.other = self._branches(scope, [s.then, s.other])
        elif isinstance(s, ast.Switch):
            self._switch(s, scope)
        elif isinstance(s, ast.VarDecl):
            self.var_decl(s, scope)
        elif isinstance(s, ast.ConstDecl):
            self.env.decls.const_decl(s, scope)
            scope.declare(s)
        elif isinstance(s, ast.Exit):
            if isinstance(scope.owner, ast.ParserDecl):
                raise P4Error(s.loc, "exit is not allowed in a parser")
            if isinstance(scope.owner, ast.FunctionDecl):
                raise P4Error(s.loc, "exit is not allowed in a function")
        elif isinstance(s, ast.Return):
            if self.env.calls.check_return(s, scope):
                pass
            elif s.value is not None:
                raise P4Error(s.loc, "return with a value is only allowed in functions")
            if isinstance(scope.owner, ast.ParserDecl):
                raise P4Error(s.loc, "return is not allowed in a parser")
        elif isinstance(s, ast.Empty):
            pass
        elif isinstance(s, (ast.For, ast.ForIn)):
            self._loop(s, scope)
        elif isinstance(s, (ast.Break, ast.Continue)):
            if not self.env.loops:
                raise P4Error(s.loc, f"'{type(s).__name__.lower()}' is only allowed inside a for loop")
        else:
            raise P4Error(s.loc, f"{type(s).__name__} is not supported here")
        return s

    def _branches(self, scope: Scope, bodies: list[ast.Stmt | None]) -> list[ast.Stmt | None]:
        """The arms of an if or a switch, each from what was known before it; after them, what
        none of them changed.  Returns the arms to run (``stmt``)."""
        before, after, arms = self.env.known, [], []
        for body in bodies:
            self.env.known = dict(before)
            arms.append(None if body is None else self.stmt(body, Scope(scope, scope.owner)))
            after.append(self.env.known)
        self.env.divisions.merge_values(before, after)
        return arms

    def _loop(self, s: ast.For | ast.ForIn, scope: Scope) -> None:
        self.env.divisions.forget_all()  # p4c drops what the loop writes; here, everything
        try:
            self._loop_body(s, scope)
        finally:
            self.env.divisions.forget_all()

    def _loop_body(self, s: ast.For | ast.ForIn, scope: Scope) -> None:
        if isinstance(scope.owner, ast.ParserDecl):
            raise P4Error(s.loc, "a for loop in a parser is not supported by the built-in target")
        inner = Scope(scope, scope.owner)
        for decl in s.init if isinstance(s, ast.For) else [s.var]:
            if isinstance(decl, ast.VarDecl):
                scope.declare_loop_variable(decl)
        if isinstance(s, ast.For):
            s.init = [self.stmt(x, inner) for x in s.init]
            if s.cond is not None:
                self.env.exprs.expr(s.cond, inner)
                self.env.exprs.coerce(s.cond, BOOL, "for condition")
        else:
            self.var_decl(s.var, inner)
            t = s.var.type
            if s.hi is None:
                ct = self.env.exprs.expr(s.collection, scope)
                if not isinstance(ct, StackT):  # p4c's frontend iterates over ranges, stacks and list<T> only
                    raise P4Error(s.collection.loc, "Typechecking does not support iteration over this "
                                  f"collection of type {ct}")
                if self.env.arch == "tna":
                    raise P4Error(s.collection.loc, "for-in over a header stack is not supported by the "
                                  "built-in target")
            elif not isinstance(t, BitsT):
                raise P4Error(s.var.loc, f"a range loop needs a bit<W> or int<W> variable, not {t}")
            if self.env.arch == "v1model":  # p4c-bm2-ss 1.2.5's CheckUnsupported: classic for loops only
                self.env.divisions.defer(0, P4Error(s.loc, "BMV2 does not support for-in loops"))
            for item in [s.collection, s.hi] if s.hi is not None else []:
                self.env.exprs.expr(item, scope)
                self.env.exprs.coerce(item, t, "for-in element")
        self.env.loops += 1
        try:
            if isinstance(s, ast.For):
                s.update = [self.stmt(x, inner) for x in s.update]
            s.body = self.stmt(s.body, Scope(inner, scope.owner))
        finally:
            self.env.loops -= 1

    def _switch(self, s: ast.Switch, scope: Scope) -> None:
        _default_last(s)
        if isinstance(scope.owner, ast.ActionDecl):  # p4c's midend (EliminateSwitch), in a used action only
            stages.defer(self.env, stages.MIDEND_UNSUPPORTED,
                         P4Error(s.loc, "SwitchStatement: switch statements not supported in actions on this target"),
                         owner=scope.owner)
        self.env.exprs.switch_subject = s.subject  # where p4c allows action_run
        t = self.env.exprs.expr(s.subject, scope)
        if not isinstance(t, ActionRunT):
            return self._value_switch(s, t, scope)
        allowed = {ref.decl.name: ref.decl for ref in t.table.actions}
        seen: set[str] = set()
        before, after = self.env.known, []
        for case in s.cases:
            for i, label in enumerate(case.labels):
                if isinstance(label, ast.PathExpr):
                    label = case.labels[i] = label.name
                elif label != "default":
                    raise P4Error(label.loc, "a switch on action_run needs action names as labels")
                if label != "default" and label not in allowed:
                    raise P4Error(case.loc, f"'{label}' is not an action of table {t.table.name}")
                if label == "default" and label in seen:  # p4c: at the switch
                    raise P4Error(s.loc, "switch has multiple 'default' labels:")
                if label in seen:
                    raise P4Error(case.loc, f"switch label '{label}' appears twice")
                seen.add(label)
            if case.body is not None:
                self.env.known = dict(before)
                self.stmt(case.body, Scope(scope, scope.owner))
                after.append(self.env.known)
        if s.cases and s.cases[-1].body is None:
            raise P4Error(s.cases[-1].loc, "the last switch case needs a block")
        self.env.divisions.merge_values(before, after)

    def _value_switch(self, s: ast.Switch, t: Type, scope: Scope) -> None:
        """``switch (expr)`` with constant labels (P4-16 v1.2.2): bit<W>, int<W> and enums.  The spec
        allows error too, but p4c 1.2.5 refuses it, and a program p4c refuses is refused here."""
        if t is ERROR:
            raise P4Error(s.subject.loc, "'switch' type can't be error")
        if not isinstance(t, (BitsT, EnumT)):
            raise P4Error(s.subject.loc, f"cannot switch on a value of type {t}")
        # p4c's frontend removes a switch with no cases
        if s.cases and stages.blocks_kept(self.env) and not _declares_exact(self.env.program):
            stages.defer(self.env, stages.MIDEND_UNSUPPORTED, P4Error(  # EliminateSwitch makes a table of it
                s.loc, "Could not find declaration for 'match_kind.exact', which is needed to implement switch "
                "statements"), owner=scope.owner if isinstance(scope.owner, ast.FunctionDecl) else None)
        seen: set[Any] = set()
        before, after = self.env.known, []
        for case in s.cases:
            for label in case.labels:
                if label == "default":
                    key: Any = "default"
                else:
                    self.env.exprs.expr(label, scope)
                    try:
                        self.env.exprs.coerce(label, t, "switch label")
                    except P4Error:  # p4c's TypeInference, at the switch's subject
                        raise P4Error(s.subject.loc, f"'{ast.text(s.subject)}' with type '{t}' cannot be compared "
                                      f"to '{ast.text(label)}' with type '{label.type}'") from None
                    if label.value is None:
                        raise P4Error(label.loc, "switch labels must be compile-time constants")
                    key = label.value
                if key == "default" and key in seen:  # p4c: at the switch
                    raise P4Error(s.loc, "switch has multiple 'default' labels:")
                if key in seen:
                    raise P4Error(case.loc, "a switch label appears twice")
                seen.add(key)
            if case.body is not None:
                self.env.known = dict(before)
                case.body = self.stmt(case.body, Scope(scope, scope.owner))
                after.append(self.env.known)
        if s.cases and s.cases[-1].body is None:
            raise P4Error(s.cases[-1].loc, "the last switch case needs a block")
        self.env.divisions.merge_values(before, after)

    def lvalue(self, e: ast.Expr) -> None:
        """Raise unless ``e`` can be written."""
        if isinstance(e, ast.PathExpr):
            d = e.decl
            if isinstance(d, ast.VarDecl):
                return
            if isinstance(d, ast.Param) and d.direction in ("out", "inout"):
                return
            what = "an 'in' parameter" if isinstance(d, ast.Param) else "not a variable"
            raise P4Error(e.loc, f"cannot assign to '{e.name}': {what}")
        if isinstance(e, ast.Member) and isinstance(e.base.type, StackT) and e.member not in ("next", "last"):
            raise P4Error(e.loc, f"cannot assign to '.{e.member}' of a header stack")
        if isinstance(e, ast.Member) and isinstance(e.base.type, (HeaderT, StackT)):
            return self.lvalue(e.base)
        if isinstance(e, (ast.Index, ast.Slice)):
            return self.lvalue(e.base)
        raise P4Error(e.loc, "this expression cannot be assigned to")


def _default_last(s: ast.Switch) -> None:
    """p4c's ValidateParsedProgram (before any type rule): `default` is the last label, at the switch."""
    labels = [label for case in s.cases for label in case.labels]
    first = next((i for i, label in enumerate(labels) if label == "default"), len(labels) - 1)
    if first + 1 < len(labels):
        label = labels[first + 1]
        if label == "default":
            raise P4Error(s.loc, "switch has multiple 'default' labels:")
        name = label if isinstance(label, str) else ast.text(label)
        raise P4Error(s.loc, f"switch label {name} follows 'default' label, which is not allowed.")



def _declares_exact(program: ast.Program) -> bool:
    """Whether the program declares the ``exact`` match_kind."""
    return any(isinstance(d, ast.MatchKindDecl) and "exact" in d.members for d in program.decls)
