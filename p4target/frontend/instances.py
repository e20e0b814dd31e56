"""Checker rules for instances of parsers and controls: constructor arguments and sub-parsers.

A pass of the checker (env.py).  A parser or control with constructor parameters is
checked once per distinct list of argument values, on a copy whose parameters are
constants (p4c's SpecializeAll does the same), so a parameter may size a register or
appear in a keyset; a control passed as an argument is bound to its instance the same
way.  A parser instantiated in a parser is a sub-parser: its ``apply`` may only stand
directly in a state, where the executor splits the state as p4c's Inline pass does.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from . import ast
from .anchors import at_outer
from .env import Pass
from .errors import P4Error
from .scope import CallTarget
from .source_text import find_after
from .types import BOOL, ERROR, INFINT, VOID, BitsT, BlockT, EnumT, ExternT, Type


def _is_parser(decl: Any) -> bool:
    """A parser declaration or parser type (the rest are controls and packages)."""
    return isinstance(decl, ast.ParserDecl) or getattr(decl, "kind", "") == "parser"


def _is_parser_apply(node: Any) -> bool:
    return isinstance(node, ast.Call) and node.target is not None and node.target.kind == "parser_apply"


def _find_parser_apply(node: Any) -> ast.Call | None:
    """The first sub-parser apply anywhere in a checked statement tree."""
    if _is_parser_apply(node):
        return node
    for x in ast.children(node):
        found = _find_parser_apply(x)
        if found is not None:
            return found
    return None


class Instances(Pass):
    """Instances of parsers/controls."""

    def block_instance(self, loc: Any, decl: Any, args: list[ast.Expr], scope: Any) -> Any:
        """The declaration an instance ``decl(args)`` runs: ``decl`` itself, or its copy
        specialised for these constructor argument values."""
        params = decl.ctor_params
        if not params:
            if args:
                raise P4Error(loc, f"{decl.name} takes no constructor arguments")
            return decl
        self.env.calls.normalize_args(loc, params, args)
        if len(args) != len(params):
            raise P4Error(loc, f"{decl.name} takes {len(params)} constructor arguments, got {len(args)}")
        consts: list[ast.ConstDecl] = []
        key: list[Any] = [id(decl)]
        bound: dict[str, ast.Instantiation] = {}  # parameter -> an instance of the caller's
        made: list[ast.Instantiation] = []  # instances the copy makes for constructor calls
        for p, a in zip(params, args):
            pt = self.env.decls.resolve_type(p.type_ref)
            if isinstance(pt, BlockT):
                inst = self._block_argument(decl, p, pt, a, scope)
                if isinstance(a, ast.CtorCall):
                    made.append(inst)
                    key.append(id(a))  # a copy of its own: the instance is one of its locals
                else:
                    bound[p.name] = inst
                    key.append(id(inst))
                continue
            inst = self._extern_argument(pt, a, scope)
            if inst is not None:
                bound[p.name] = inst
                key.append(id(inst))
                continue
            if not (isinstance(pt, (BitsT, EnumT)) or pt in (BOOL, INFINT, ERROR)):
                raise P4Error(p.loc, f"constructor parameter '{p.name}' of type {pt} is not supported by the "
                              "built-in target (use bit<W>, int<W>, int, bool, an enum or error)")
            if isinstance(a, ast.Default):
                raise P4Error(a.loc, "'_' is not a constructor argument")
            if a.type is None:  # a default value, or a package argument
                self.env.exprs.expr(a, self.env.globals if a is p.default else scope)
            with at_outer(loc):  # p4c: at the instance, which asks for the unification
                self.env.exprs.coerce(a, pt, f"constructor argument '{p.name}'")
            if a.value is None or isinstance(a.value, str):
                raise P4Error(a.loc, "constructor arguments must be compile-time constants")
            const = ast.ConstDecl(p.loc, [], p.name, p.type_ref, a)
            const.type, const.ctor_param = pt, True
            consts.append(const)
            key.append((str(pt), a.value))
        specs = self.env.block_specs
        spec = specs.get(tuple(key))
        if spec is None:
            spec = copy.deepcopy(decl)  # never checked itself, so the copy holds no annotations
            spec.ctor_params = []
            spec.locals[:0] = made
            spec.instance_args = bound
            specs[tuple(key)] = spec
            self.env.blocks.block(spec, consts, decl, bound)
        return spec

    def _extern_argument(self, pt: Type, a: ast.Expr, scope: Any) -> ast.Instantiation | None:
        """In frontend mode, an extern instance passed by name for a constructor parameter of its
        type: bound as a control argument is, its name naming that instance in the copy (the
        built-in target has no such parameters)."""
        if not (self.env.frontend and isinstance(pt, ExternT) and isinstance(a, ast.PathExpr)):
            return None
        inst = (scope.root() if a.top_level else scope).lookup(a.name)
        if not (isinstance(inst, ast.Instantiation) and inst.type == pt):
            return None
        a.decl, a.type = inst, inst.type
        return inst

    def _block_argument(self, decl: Any, p: ast.Param, pt: BlockT, a: ast.Expr, scope: Any) -> ast.Instantiation:
        """A control passed as a constructor argument (corpus issue1566-bmv2.p4), bound as p4c's
        SpecializeAll binds it: an instance's name is that instance, shared with the caller (its
        tables and externs are the caller's, named where it is declared); a constructor call
        becomes an instance of the copy's own, named after the parameter (p4c's convertArgument)."""
        where = f"{decl.name}'s constructor parameter '{p.name}' of type {pt}"
        if _is_parser(pt.decl) != isinstance(decl, ast.ParserDecl):  # p4c's Inline, at the parameter
            inner, outer = ("parser", "control") if _is_parser(pt.decl) else ("control", "parser")
            raise P4Error(find_after(p.loc, rf"\b{re.escape(p.name)}\b(?=\s*[,)=])"),
                          f"{p.name}: instantiation of {inner} in {outer}")
        if _is_parser(pt.decl):  # sub-parsers are inlined per apply site: see executor/subparsers.py
            raise P4Error(a.loc, f"{where}, a parser passed as a constructor argument, is not supported by the "
                          "built-in target")
        if isinstance(a, ast.CtorCall):
            inst = ast.Instantiation(a.loc, [], p.name, a.type_ref, a.args)
            for x in a.args:  # the call's own arguments are the caller's values
                if not isinstance(x, (ast.Default, ast.CtorCall)) and x.type is None:
                    self.env.exprs.expr(x, scope)
            target = self.env.decls.resolve_type(a.type_ref)
        elif isinstance(a, ast.PathExpr):
            inst = (scope.root() if a.top_level else scope).lookup(a.name)
            if not (isinstance(inst, ast.Instantiation) and isinstance(inst.type, BlockT)):
                raise P4Error(a.loc, f"{where}: '{a.name}' is not a control instance")
            if self.env.globals.values.get(a.name) is inst:
                raise P4Error(a.loc, f"{where}: a control instantiated at the top level and passed as a constructor "
                              "argument is not supported by the built-in target")
            a.decl, a.type = inst, inst.type
            target = inst.type
        else:
            raise P4Error(a.loc, f"{where} needs a control instance or a constructor call")
        if not (isinstance(target, BlockT) and self._same_apply(pt.decl, target.decl)):
            raise P4Error(a.loc, f"{where}: {target} does not have its apply parameters")
        return inst

    def _same_apply(self, want: Any, have: Any) -> bool:
        """Whether a control declaration fits a control type: the same apply parameters."""
        if not isinstance(have, ast.ControlDecl) or _is_parser(want) or getattr(want, "type_params", None):
            return False
        return len(want.params) == len(have.params) and all(
            w.direction == h.direction
            and self.env.decls.resolve_type(w.type_ref) == self.env.decls.resolve_type(h.type_ref)
            for w, h in zip(want.params, have.params))

    def block_instantiation(self, decl: ast.Instantiation, t: BlockT, scope: Any) -> None:
        """``P(...) p;`` or ``C(...) c;`` inside a parser or control."""
        owner = scope.owner
        if isinstance(t.decl, ast.ParserDecl) and not isinstance(owner, ast.ParserDecl):
            raise P4Error(decl.loc, "a parser can only be instantiated inside a parser")
        if isinstance(t.decl, ast.ControlDecl) and isinstance(owner, ast.ParserDecl):
            raise P4Error(decl.loc, "a control cannot be instantiated inside a parser")
        if t.decl in self.env.open_blocks:
            raise P4Error(decl.loc, f"{t.decl.name} cannot instantiate itself (recursion)")
        decl.type = BlockT(self.block_instance(decl.loc, t.decl, decl.args, scope))

    def open_block(self, origin: Any) -> None:
        self.env.open_blocks.append(origin)

    def close_block(self) -> None:
        self.env.open_blocks.pop()

    def parser_apply(self, e: ast.Call, f: ast.Member, bt: BlockT, scope: Any) -> Type:
        """``p.apply(packet, ...)`` of a sub-parser, from a parser state."""
        if not isinstance(scope.owner, ast.ParserDecl):
            raise P4Error(e.loc, "a parser can only be applied from a parser state")
        if not isinstance(f.base, ast.PathExpr) or not isinstance(f.base.decl, ast.Instantiation):
            raise P4Error(e.loc, "apply a parser through its instance")
        self.env.calls.apply_args(e.loc, f.base.decl, bt.decl, e.args)
        e.target = CallTarget("parser_apply", "apply", f.base.decl)
        return VOID

    def direct_apply(self, e: ast.Call, f: ast.TypeMember, scope: Any) -> Type:
        """``MyControl.apply(...)`` / ``MyParser.apply(...)`` (P4-16 "direct type invocation"):
        as p4c's InstantiateDirectCalls, an anonymous instance ``MyControl() MyControl_inst;``
        named ``@name("MyControl")`` joins the enclosing block's locals (ahead of its own, in
        call order), so each such call has its own instance and control-plane names."""
        owner = scope.owner
        if f.member != "apply":
            raise P4Error(f.loc, f"{f.type_name} has no method '{f.member}'")
        if not isinstance(owner, (ast.ControlDecl, ast.ParserDecl)):
            raise P4Error(e.loc, f"{f.type_name}.apply can only be called in an apply block or a parser state")
        taken = {d.name for d in [*owner.locals, *owner.params]}
        name, n = f"{f.type_name}_inst", 0
        while name in taken or scope.lookup(name) is not None:
            name, n = f"{f.type_name}_inst_{n}", n + 1
        note = ast.Annotation(f.loc, "name", [ast.StringLit(f.loc, f.type_name)])
        inst = ast.Instantiation(f.loc, [note], name, ast.TypeRef(f.loc, "named", name=f.type_name), [])
        self.env.decls.instantiation(inst, scope)
        placed = self.env.direct_placed.setdefault(id(owner), 0)
        owner.locals.insert(placed, inst)
        self.env.direct_placed[id(owner)] = placed + 1
        base = ast.PathExpr(f.loc, name)
        base.decl, base.type = inst, inst.type
        e.func = ast.Member(f.loc, base, "apply")
        e.func.type = VOID
        if isinstance(inst.type.decl, ast.ParserDecl):
            return self.parser_apply(e, e.func, inst.type, scope)
        self.env.calls.apply_args(e.loc, inst, inst.type.decl, e.args)
        e.target = CallTarget("block_apply", "apply", inst)
        return VOID

    def check_parser_apply_places(self, state: ast.ParserState) -> None:
        """The executor splits a state at a sub-parser apply, so it must be one of the
        state's own statements (not inside an ``if`` or a block)."""
        for s in state.stmts:
            if isinstance(s, ast.CallStmt) and _is_parser_apply(s.call):
                continue
            found = _find_parser_apply(s)
            if found is not None:
                raise P4Error(found.loc, "a sub-parser apply inside a block or an 'if' is not supported by the "
                              "built-in target: apply it directly in a state")
