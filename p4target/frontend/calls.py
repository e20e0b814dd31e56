"""Checker rules for calls: user functions (generic ones specialised per type binding),
named arguments, default parameter values and explicit type arguments.

A mixin of ``checker.Checker``: call sites are normalised here (named arguments put in
parameter order, defaults filled in), so every backend sees plain positional calls.
"""

from __future__ import annotations

import copy
from typing import Any

from . import ast
from .env import CheckEnv
from .errors import P4Error
from .scope import CallTarget, Scope
from .tna import is_optional
from .types import VOID, Type


def contains_call(e: Any) -> bool:
    """Whether an (unchecked or checked) expression tree contains a call."""
    return isinstance(e, ast.Call) or any(contains_call(c) for c in ast.children(e))


class CallChecks:
    """Function declarations and argument lists (mixed into the Checker)."""

    env: CheckEnv

    # ---------------------------------------------------------------- declarations
    def _function(self, decl: ast.FunctionDecl, scope: Any) -> None:
        scope.declare(decl)
        self.env.fn_scopes[decl] = scope
        if not decl.proto.type_params:  # generic bodies are checked once per binding, at calls
            self._function_body(decl, scope, {}, owned=True)

    def _function_body(self, decl: ast.FunctionDecl, scope: Any, bindings: dict[str, Type],
                       owned: bool = False) -> None:
        """``owned``: a function p4c removes when no call uses it (not an extern's method)."""
        saved, saved_generic = self.env.type_vars, self.env.generic_names
        self.env.type_vars = {**saved, **bindings}
        self.env.generic_names = saved_generic | set(bindings)  # type variables in the source: p4c checks them as such
        try:
            inner = Scope(scope, decl)
            self._params(decl.proto.params, inner)
            for p in decl.proto.params:
                if p.direction == "":
                    p.direction = "in"  # a function's directionless parameters behave as 'in'
            decl.type = self.resolve_type(decl.proto.return_type)
            with self.fresh_values(decl if owned else None, decl.proto.params):  # a function on its own
                self.stmt(decl.body, Scope(inner, decl))
        finally:
            self.env.type_vars, self.env.generic_names = saved, saved_generic

    def _return(self, s: ast.Return, scope: Any) -> bool:
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
        self.expr(s.value, scope)
        self.coerce(s.value, fn.type, "return value")
        return True

    # ---------------------------------------------------------------- calls
    def _call_user_function(self, e: ast.Call, d: ast.FunctionDecl, scope: Any) -> Type:
        proto = d.proto
        bindings: dict[str, Type] = {}
        self._check_args(e.loc, proto.params, e.args, bindings, proto.type_params)
        if proto.type_params:
            missing = [t for t in proto.type_params if t not in bindings]
            if missing:
                raise P4Error(e.loc, f"cannot infer type argument {missing[0]} of {d.name}: give it explicitly")
            d = self._specialize(d, bindings)
        e.target = CallTarget("user_function", d.name, d)
        self.env.used.add(d)
        self.bind_params(d, d.proto.params, e.args, data=False)
        return d.type

    def _specialize(self, d: ast.FunctionDecl, bindings: dict[str, Type]) -> ast.FunctionDecl:
        key = (id(d), *(bindings[t] for t in d.proto.type_params))
        spec = self.env.specializations.get(key)
        if spec is None:
            spec = copy.deepcopy(d)
            spec.proto.type_params = []
            self.env.specializations[key] = spec
            self._function_body(spec, self.env.fn_scopes[d], {t: bindings[t] for t in d.proto.type_params}, owned=True)
        return spec

    def _take_type_args(self, bindings: dict[str, Type], type_params: list[str] | None) -> None:
        """Bind explicit type arguments (``f<bit<8>>(x)``) to the callee's type parameters."""
        explicit, self.env.pending_type_args = self.env.pending_type_args, None
        if not explicit:
            return
        if not type_params or len(type_params) != len(explicit):
            raise P4Error(self.env.call_loc, f"expected {len(type_params or [])} type arguments, got {len(explicit)}")
        bindings.update(zip(type_params, explicit))

    def _arity_fits(self, params: list[ast.Param], args: list[ast.Expr]) -> bool:
        """Whether a call's arguments can bind these parameters (for overloads by arity)."""
        if any(isinstance(a, ast.NamedArg) for a in args):
            names = {p.name for p in params}
            given = {a.name for a in args if isinstance(a, ast.NamedArg)}
            return given <= names and all(p.name in given or p.default is not None for p in params)
        return len(args) <= len(params) and all(p.default is not None or is_optional(p) for p in params[len(args):])

    def _normalize_args(self, loc: Any, params: list[ast.Param], args: list[ast.Expr]) -> None:
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
