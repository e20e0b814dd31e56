"""A package instance's arguments against its parameters' types, as p4c's type unification
equates them (frontend-only mode, frontend_only.py).

p4c equates the type of each constructor argument with its parameter's type when it checks the
instance ``P(args) name;``: a parser or control argument must have the parser/control type the
parameter names (the same kind, each apply parameter with its direction and type, the type
parameters bound consistently across all arguments), a package argument the package type, and
a parameter of any other type (``tuple<>``) takes no parser, control or package.  A mismatch is
reported at the package *declaration* ("'package P'", the node whose constructor asked for the
unification), the argument and its parameter named after it.
"""

from __future__ import annotations

import re
from typing import Any

from . import ast
from .errors import P4Error
from .source_text import find_after
from .tna import is_optional
from .types import INFINT, HeaderT, TupleT, Type

Binds = dict[str, Type]  # a package's type parameter -> the type it is bound to


def block_kind(decl: Any) -> str:
    """parser / control / package for a parser/control/package declaration or type, else ''."""
    if isinstance(decl, ast.ParserDecl):
        return "parser"
    if isinstance(decl, ast.ControlDecl):
        return "control"
    return decl.kind if isinstance(decl, ast.BlockTypeDecl) else ""


def _mismatch(got: Type, bound: Type) -> str:
    """p4c's words for two types that do not unify: an unsized int, two structs, or else a cast."""
    if INFINT in (got, bound):
        other = bound if got is INFINT else got
        return f"'int' type can only be unified with 'int', 'bit<>', or 'signed<>' types, not with '{other}'"
    if any(isinstance(t, TupleT) for t in (got, bound)) and any(isinstance(t, HeaderT) for t in (got, bound)):
        return f"Cannot cast implicitly type '{got}' to type '{bound}'"
    return f"Cannot unify '{got}' with '{bound}'"


def _describe(decl: Any) -> str:
    return f"{block_kind(decl)} {decl.name}"


class PackageTypes:
    """The unification of one package instance's arguments with its parameters (p4c's
    ``Type of argument ... does not match type of parameter``)."""

    def __init__(self, env: Any, package: ast.BlockTypeDecl, binds: Binds) -> None:
        self.env = env
        self.package = package
        self.binds = binds

    def fail(self, what: str) -> P4Error:
        name = self.package.name
        return P4Error(find_after(self.package.loc, rf"\bpackage\s+({re.escape(name)})\b", group=1),
                       f"'package {name}': {what}")

    def argument(self, param: ast.Param, have: Any, have_binds: Binds | None) -> None:
        """``have`` (a parser/control/package declaration, or None for a value) passed for ``param``;
        ``have_binds``: a package argument's own type parameters, as its instance bound them."""
        ref = param.type_ref
        expected = self.env.types.get(ref.name) if ref.kind == "named" else None
        want = block_kind(expected)
        if have is None:
            return  # a value: the expression checker coerces it
        if not want:
            wanted = str(self.env.decls.resolve_type(ref)) if ref.kind != "named" or ref.name not in self.binds \
                else str(self.binds[ref.name])
            raise self.fail(f"Cannot cast implicitly type '{_describe(have)}' to type '{wanted}' "
                            f"(argument for parameter '{param.name}')")
        if block_kind(have) != want or (want == "package" and have is not expected):
            raise self.fail(f"Cannot cast implicitly type '{_describe(have)}' to type '{_describe(expected)}' "
                            f"(argument for parameter '{param.name}')")
        if want == "package":
            for name, arg_ref in zip(expected.type_params, ref.args):
                if have_binds is not None and name in have_binds:
                    self.equate(arg_ref, have_binds[name], param)
            return
        required = [p for p in expected.params if not is_optional(p)]  # TNA's trailing @optional ones
        if not len(required) <= len(have.params) <= len(expected.params):
            raise P4Error(have.loc, f"{have.name} must take {len(expected.params)} parameters, like "
                          f"{expected.name} (package {self.package.name} argument '{param.name}')")
        self.signature(param, have, expected)

    def value(self, param: ast.Param, arg: ast.Expr) -> None:
        """A value (a constant) passed for ``param``: of the parameter's type, or binding the
        package's type parameter it names."""
        ref = param.type_ref
        if arg.type is None or block_kind(self.env.types.get(ref.name) if ref.kind == "named" else None):
            return
        if ref.kind == "named" and ref.name in self.package.type_params:
            self.equate(ref, arg.type, param)
            return
        try:
            self.env.exprs.coerce(arg, self.env.decls.resolve_type(ref), f"argument for parameter '{param.name}'")
        except P4Error as err:
            raise self.fail(err.message) from None

    def signature(self, param: ast.Param, have: Any, expected: ast.BlockTypeDecl) -> None:
        """Each apply parameter's direction and type as the parser/control type has them, its type
        parameters bound by the package parameter's type arguments (or inferred)."""
        type_args = dict(zip(expected.type_params, param.type_ref.args))
        for p, ep in zip(have.params, expected.params):
            if p.type_ref.kind == "named" and p.type_ref.name in have.type_params:
                continue  # a generic parser's or control's own type variable: p4c infers it
            got = self.env.decls.resolve_type(p.type_ref)
            eref = ep.type_ref
            if p.direction != ep.direction:
                raise self.fail(f"{have.name}'s parameter '{p.name}' is '{p.direction} {got}', but "
                                f"{expected.name} has '{ep.direction} {eref.name or eref.kind}'")
            if eref.kind == "named" and eref.name in expected.type_params:
                if eref.name in type_args:
                    self.equate(type_args[eref.name], got, param)
                continue
            self.equate(eref, got, param)

    def equate(self, ref: ast.TypeRef, got: Type, param: ast.Param) -> None:
        """The type ``ref`` names (a package type parameter is bound on first use) is ``got``."""
        if ref.kind == "named" and ref.name in self.package.type_params:
            bound = self.binds.setdefault(ref.name, got)
        else:
            bound = self.env.decls.resolve_type(ref)
        if bound != got:
            raise self.fail(f"{_mismatch(got, bound)} (argument for parameter '{param.name}')")
