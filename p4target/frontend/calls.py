"""Checker rules for calls: user functions (generic ones specialised per type binding),
named arguments, default parameter values and explicit type arguments.

A pass of the checker (env.py): call sites are normalised here (named arguments put in
parameter order, defaults filled in), so every backend sees plain positional calls.
"""

from __future__ import annotations

import copy
from typing import Any

from . import ast, stages
from .anchors import at_outer
from .env import Pass
from .errors import P4Error
from .initializers import is_unknown_struct
from .scope import CallTarget, Scope
from .tna import is_optional
from .types import DONTCARE, INFINT, VOID, BlockT, ExternT, ListT, StackT, TableT, TupleT, Type, TypeVar


def contains_call(e: Any) -> bool:
    """Whether an (unchecked or checked) expression tree contains a call."""
    return isinstance(e, ast.Call) or any(contains_call(c) for c in ast.children(e))


def _holds_infint(t: Type) -> bool:
    """A list expression's tuple type with an unsized integer in it (no width to bind)."""
    return isinstance(t, TupleT) and any(x is INFINT or _holds_infint(x) for x in t.elems)


class Calls(Pass):
    """Function declarations and argument lists."""

    # ---------------------------------------------------------------- declarations
    def function(self, decl: ast.FunctionDecl, scope: Any) -> None:
        scope.declare(decl)
        self.env.fn_scopes[decl] = scope
        if not decl.proto.type_params:  # generic bodies are checked once per binding, at calls
            self.function_body(decl, scope, {}, owned=True)
        else:
            self.generic_body(decl, scope)

    def generic_body(self, decl: ast.FunctionDecl, scope: Any) -> None:
        """p4c's TypeInference checks a generic function once with its type parameters as type
        variables (a value of one is only of that type), called or not; ours runs the copies
        specialised per binding, so the check is made on a copy nothing else sees."""
        generic = copy.deepcopy(decl)
        generic.proto.type_params = []
        saved = len(self.env.midend), set(self.env.used), self.env.frontend
        self.env.frontend = True  # p4c's rules only: the target's wait for the copies with real types
        try:
            self.function_body(generic, scope, {t: TypeVar(t) for t in decl.proto.type_params})
        except P4Error as err:
            if not target_only(err):
                raise
        finally:  # what the copy's body would defer or use belongs to no program function
            del self.env.midend[saved[0]:]
            self.env.used &= saved[1]
            self.env.frontend = saved[2]

    def function_body(self, decl: ast.FunctionDecl, scope: Any, bindings: dict[str, Type],
                       owned: bool = False) -> None:
        """``owned``: a function p4c removes when no call uses it (not an extern's method)."""
        saved, saved_generic = self.env.type_vars, self.env.generic_names
        self.env.type_vars = {**saved, **bindings}
        self.env.generic_names = saved_generic | set(bindings)  # type variables in the source: p4c checks them as such
        try:
            inner = Scope(scope, decl)
            self.env.blocks.params(decl.proto.params, inner)
            for p in decl.proto.params:
                if p.direction == "":
                    p.direction = "in"  # a function's directionless parameters behave as 'in'
            decl.type = self.env.decls.resolve_type(decl.proto.return_type)
            with self.env.divisions.fresh_values(decl if owned else None, decl.proto.params):  # a function on its own
                self.env.stmts.stmt(decl.body, Scope(inner, decl))
            if decl.type is not VOID and not _always_returns(decl.body):
                stages.defer(self.env, stages.SIMPLIFY_DEF_USE, P4Error(
                    decl.loc, f"Function '{decl.name}' does not return a value on all paths"), owner=decl)
        finally:
            self.env.type_vars, self.env.generic_names = saved, saved_generic

    def check_return(self, s: ast.Return, scope: Any) -> bool:
        """Check a return inside a function; False when not inside one."""
        fn = scope.owner
        if not isinstance(fn, ast.FunctionDecl):
            return False
        if s.value is None:
            if fn.type is not VOID:
                raise P4Error(s.loc, f"function {fn.name} must return a value of type {fn.type}")
            return True
        if fn.type is VOID:
            raise P4Error(s.loc, f"function {fn.name} returns void: 'return' cannot have a value")
        self.env.exprs.expr(s.value, scope)
        with at_outer(s.loc, lambda: f"return {ast.text(s.value)}"):  # p4c: at the statement ('return x')
            self.env.exprs.coerce(s.value, fn.type, "return value")
        return True

    # ---------------------------------------------------------------- calls
    def call_user_function(self, e: ast.Call, d: ast.FunctionDecl, scope: Any) -> Type:
        if scope.owner is d:  # p4c's ResolveReferences: a function is not visible in its own body
            raise P4Error(e.loc, f"{d.name}: declaration not found")
        proto = d.proto
        bindings: dict[str, Type] = {}
        self.check_args(e.loc, proto.params, e.args, bindings, proto.type_params)
        if proto.type_params:
            missing = [t for t in proto.type_params if t not in bindings]
            if missing:
                raise P4Error(e.loc, f"cannot infer type argument {missing[0]} of {d.name}: give it explicitly")
            d = self._specialize(d, bindings)
        e.target = CallTarget("user_function", d.name, d)
        self.env.used.add(d)
        self.env.divisions.bind_params(d, d.proto.params, e.args, data=False)
        return d.type

    def call_action(self, e: ast.Call, d: ast.ActionDecl, scope: Scope) -> Type:
        if isinstance(scope.owner, ast.ParserDecl):
            raise P4Error(e.loc, "actions cannot be called from a parser")
        if isinstance(scope.owner, ast.FunctionDecl):  # p4c's TypeInference, before the arguments
            raise P4Error(e.loc, f"{ast.text(e)}: Functions cannot call actions")
        self.check_args(e.loc, d.params, e.args, {})
        e.target = CallTarget("action", d.name, d)
        self.env.used.add(d)
        self.env.divisions.bind_params(d, d.params, e.args, data=False)
        return VOID

    def _specialize(self, d: ast.FunctionDecl, bindings: dict[str, Type]) -> ast.FunctionDecl:
        key = (id(d), *(bindings[t] for t in d.proto.type_params))
        spec = self.env.specializations.get(key)
        if spec is None:
            spec = copy.deepcopy(d)
            spec.proto.type_params = []
            self.env.specializations[key] = spec
            self.function_body(spec, self.env.fn_scopes[d], {t: bindings[t] for t in d.proto.type_params}, owned=True)
        return spec

    # ---------------------------------------------------------------- arguments
    def check_args(self, loc, params: list[ast.Param], args: list[ast.Expr], bindings: dict[str, Type],
                    type_params: list[str] | None = None, anchored: bool = True) -> None:
        """Arity, directions and types of arguments; binds the callee's type variables.
        ``anchored``: a type mismatch is p4c's at ``loc`` (a call), not at the argument (an action
        reference in a table's properties)."""
        self.normalize_args(loc, params, args)
        self._take_type_args(bindings, type_params)
        if len(args) != len(params):
            raise P4Error(loc, f"expected {len(params)} arguments, got {len(args)}")
        for p, a in zip(params, args):
            if isinstance(a, ast.Default):
                if p.direction != "out":
                    raise P4Error(a.loc, "'_' can only be passed to an out parameter")
                continue
            pt = self.param_type(p, bindings, type_params or [])
            if pt is DONTCARE:  # p4c's TypeInference: a type variable bound to '_' by a type argument
                raise P4Error(a.loc, f"{ast.text(a)}: Could not infer a type for parameter {p.name} "
                              "(inferred type is don't care '_')")
            if _binds(pt, a.type, bindings, type_params or []):  # `register<T> r`: T from the argument's type
                pt = self.param_type(p, bindings, type_params or [])
            if isinstance(pt, TypeVar) and pt.name in (type_params or []) and pt.name not in bindings:
                _bindable(a)
                if is_unknown_struct(a.type):  # p4c: `{ f = e }` has no type of its own to bind
                    raise P4Error(a.loc, "unknown struct: Cannot infer type for unknown struct type initializer")
                if a.type is INFINT or _holds_infint(a.type):
                    raise P4Error(a.loc, f"cannot infer a width for parameter '{p.name}': give the constant a width")
                bindings[pt.name] = a.type
                pt = a.type
            with at_outer(loc if anchored else None):  # p4c: at the call ('f(b)') or instance
                self.env.exprs.coerce(a, pt, f"argument '{p.name}'")
            if p.direction in ("out", "inout"):
                self.env.stmts.lvalue(a)

    def apply_args(self, loc: Any, inst: ast.Instantiation, decl: Any, args: list[ast.Expr]) -> None:
        """The arguments of an instance's ``apply``: a generic parser's or control's type parameters
        bound by the instance's type arguments, else by these arguments (p4c's unification)."""
        bindings: dict[str, Type] = {}
        if decl.type_params and inst.type_ref.args:
            bindings = dict(zip(decl.type_params, map(self.env.decls.resolve_type, inst.type_ref.args)))
        self.check_args(loc, decl.params, args, bindings, decl.type_params or None)

    def param_type(self, p: ast.Param, bindings: dict[str, Type], type_params: list[str]) -> Type:
        saved = self.env.type_vars
        self.env.type_vars = {**{tp: TypeVar(tp) for tp in type_params}, **bindings}
        try:
            return self.env.decls.resolve_type(p.type_ref)
        finally:
            self.env.type_vars = saved

    def resolve_return(self, proto: ast.FunctionProto, bindings: dict[str, Type]) -> Type:
        saved, self.env.type_vars = self.env.type_vars, {**bindings}
        try:
            for tp in proto.type_params:
                self.env.type_vars.setdefault(tp, TypeVar(tp))
            return self.env.decls.resolve_type(proto.return_type)
        finally:
            self.env.type_vars = saved

    def _take_type_args(self, bindings: dict[str, Type], type_params: list[str] | None) -> None:
        """Bind explicit type arguments (``f<bit<8>>(x)``) to the callee's type parameters."""
        explicit, self.env.pending_type_args = self.env.pending_type_args, None
        if not explicit:
            return
        if not type_params or len(type_params) != len(explicit):
            raise P4Error(self.env.call_loc, f"expected {len(type_params or [])} type arguments, got {len(explicit)}")
        bindings.update(zip(type_params, explicit))

    def arity_fits(self, params: list[ast.Param], args: list[ast.Expr]) -> bool:
        """Whether a call's arguments can bind these parameters (for overloads by arity)."""
        if any(isinstance(a, ast.NamedArg) for a in args):
            names = {p.name for p in params}
            given = {a.name for a in args if isinstance(a, ast.NamedArg)}
            return given <= names and all(p.name in given or p.default is not None for p in params)
        return len(args) <= len(params) and all(p.default is not None or is_optional(p) for p in params[len(args):])

    def normalize_args(self, loc: Any, params: list[ast.Param], args: list[ast.Expr]) -> None:
        """Put named arguments in parameter order and fill in default values, in place."""
        named = [a for a in args if isinstance(a, ast.NamedArg)]
        if not named and len(args) >= len(params):
            return
        if named:
            if len(named) != len(args):
                raise P4Error(loc, "a call cannot mix named and positional arguments")
            by_name: dict[str, ast.Expr] = {}
            for a in named:
                if not any(p.name == a.name for p in params):
                    raise P4Error(a.loc, f"there is no parameter named '{a.name}'")
                if a.name in by_name:
                    raise P4Error(a.loc, f"argument '{a.name}' is given twice")
                by_name[a.name] = a.arg
            order = [p.name for p in params if p.name in by_name]
            if order != [a.name for a in named] and sum(contains_call(a.arg) for a in named) > 1:
                raise P4Error(loc, "named arguments with calls, given out of parameter order, "
                              "are not supported by the built-in target")
            given = [by_name.get(p.name) for p in params]
        else:
            given = list(args) + [None] * (len(params) - len(args))
        result = []
        for p, a in zip(params, given):
            if a is None:
                if p.default is None:
                    raise P4Error(loc, f"missing an argument for parameter '{p.name}'")
                a = p.default
            result.append(a)
        args[:] = result


def _always_returns(s: ast.Stmt | None) -> bool:
    """Whether every path through ``s`` ends in a return or exit (p4c's SimplifyDefUse, after its
    SimplifyControlFlow folded constant conditions)."""
    if isinstance(s, (ast.Return, ast.Exit)):
        return True
    if isinstance(s, ast.Block):
        return any(_always_returns(inner) for inner in s.stmts)
    if isinstance(s, ast.If):
        if s.cond.value is True or s.cond.value is False:
            return _always_returns(s.then if s.cond.value else s.other)
        return _always_returns(s.then) and _always_returns(s.other)
    if isinstance(s, ast.Switch):
        has_default = any(label == "default" for case in s.cases for label in case.labels)
        return has_default and all(_always_returns(case.body) for case in s.cases if case.body is not None)
    return False


def target_only(err: P4Error) -> bool:
    """A refusal of the built-in target's, not of p4c's (a generic body's type variables meet
    the target's rules only in the copies specialised per binding, blocks.generic_block's never)."""
    return "not supported by the built-in target" in err.message


def _binds(want: Type, have: Type, bindings: dict[str, Type], type_params: list[str]) -> bool:
    """Bind the callee's type variables inside a parameter's type (p4c's unification of
    ``register<T>`` with ``register<bit<8>>``); whether any was bound."""
    pairs: list[tuple[Type, Type]] = []
    if isinstance(want, ExternT) and isinstance(have, ExternT) and want.decl is have.decl:
        pairs = list(zip(want.args, have.args))
    elif isinstance(want, TupleT) and isinstance(have, TupleT) and len(want.elems) == len(have.elems):
        pairs = list(zip(want.elems, have.elems))
    elif isinstance(want, (StackT, ListT)) and type(have) is type(want):
        pairs = [(want.elem, have.elem)]
    bound = False
    for w, h in pairs:
        if isinstance(w, TypeVar) and w.name in type_params and w.name not in bindings and h is not INFINT:
            bindings[w.name] = h
            bound = True
        else:
            bound = _binds(w, h, bindings, type_params) or bound
    return bound


def directionless_constants(params: list[ast.Param], args: list[ast.Expr]) -> None:
    """p4c's TypeUnification: an extern's directionless parameter takes a compile-time constant (a
    value read from a variable or an in/out parameter is none; constants, instances and
    directionless parameters are)."""
    for p, a in zip(params, args):
        if p.direction == "" and _reads_variable(a):
            raise P4Error(a.loc, f"{ast.text(a)}: argument used for directionless parameter '{p.name}' "
                          "must be a compile-time constant")


def _reads_variable(e: ast.Expr) -> bool:
    while isinstance(e, (ast.Member, ast.Index, ast.Slice)):
        e = e.base
    return isinstance(e, ast.PathExpr) and (isinstance(e.decl, ast.VarDecl)
                                            or isinstance(e.decl, ast.Param) and e.decl.direction in ("out", "inout"))


def _bindable(arg: ast.Expr) -> None:
    """p4c's TypeInference: a type variable cannot stand for a table, control, parser or package."""
    t = arg.type
    if isinstance(t, TableT) or isinstance(t, BlockT) and not isinstance(t.decl, ast.ExternDecl):
        kind = "table" if isinstance(t, TableT) else getattr(t.decl, "kind", _BLOCK_KINDS.get(type(t.decl)))
        raise P4Error(arg.loc, f"{ast.text(arg)}: argument cannot have type {kind} {t.decl.name}")


_BLOCK_KINDS = {ast.ControlDecl: "control", ast.ParserDecl: "parser"}
