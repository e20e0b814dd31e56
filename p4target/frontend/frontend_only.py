"""The frontend-only check (``p4target-check --frontend``, ``load_frontend``), as p4c's p4test:
a program is checked against core.p4 alone, with no architecture and no ``main`` needed (a pass
of the checker, env.py).

What the target mode learns from the architecture is replaced here by p4c's generic rules: a
``main``, if there is one, must instantiate a package, with one argument per package parameter,
each a parser/control of the kind the parameter names; and a parser/control with constructor
parameters that nothing instantiates is still checked once, those parameters bound as values of
their declared types (p4c type-checks every declaration, instantiated or not).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from . import ast, initializers, stages
from .env import Pass
from .errors import P4Error
from .packages import Binds, PackageTypes, block_kind
from .source_text import find_after
from .tna import is_optional
from .types import DONTCARE, INFINT, STRING, BlockT, ExternT


def _param_lists(decl: ast.Decl) -> list[tuple[list[str], list[ast.Param]]]:
    """The (type parameters, parameters) lists a declaration's prototypes have."""
    if isinstance(decl, ast.ExternFunction):
        return [(decl.proto.type_params, decl.proto.params)]
    if isinstance(decl, ast.ExternDecl):
        protos = decl.ctors + decl.methods + decl.abstracts
        return [(decl.type_params, [])] + [(decl.type_params + p.type_params, p.params) for p in protos]
    if isinstance(decl, ast.BlockTypeDecl):
        return [(decl.type_params, decl.params)]
    if isinstance(decl, (ast.ParserDecl, ast.ControlDecl)):
        return [(decl.type_params, decl.params), (decl.type_params, decl.ctor_params)]
    if isinstance(decl, ast.FunctionDecl):
        return [(decl.proto.type_params, decl.proto.params)]
    return []


def _forbids_modules(decl: ast.Decl, params: list[ast.Param]) -> bool:
    """Whether ``params`` are the apply parameters of a parser or control (declaration or type) or
    an extern's constructor parameters: p4c's checkParameters with forbidModules."""
    if isinstance(decl, ast.ExternDecl):
        return any(params is ctor.params for ctor in decl.ctors)
    if isinstance(decl, ast.BlockTypeDecl):
        return decl.kind in ("parser", "control") and params is decl.params
    return isinstance(decl, (ast.ParserDecl, ast.ControlDecl)) and params is decl.params


def _names(ref: ast.TypeRef) -> set[str]:
    """The type names a type reference uses, its type arguments' too."""
    return {ref.name}.union(*(_names(a) for a in ref.args))
def _tuple_struct_fields(ref: ast.TypeRef) -> None:
    """p4c makes a tuple type a struct (tuple_0) whose fields cannot be void or '_'."""
    if ref.kind != "tuple":
        return
    for i, arg in enumerate(ref.args):
        if arg.kind in ("void", "dontcare"):  # string: the midend's EliminateTuples (_tuple_fields)
            raise P4Error(arg.loc, f"Field 'f{i}' of 'struct tuple_0' cannot have type '{ast.type_text(arg)}'")


def _type_names(ref: ast.TypeRef) -> set[str]:
    """The type names a type reference mentions, its type arguments' too."""
    return {ref.name} | set().union(*(_type_names(a) for a in ref.args)) if ref.kind == "named" else \
        set().union(set(), *(_type_names(a) for a in ref.args))


class FrontendOnly(Pass):
    """The package ``main``, the prototypes and the never-instantiated parsers/controls, checked
    generically."""

    def prototypes(self, decl: ast.Decl) -> None:
        """p4c's rules on a declaration's parameter lists, before it is checked (in target mode the
        architecture's own prototypes are the only ones used)."""
        if decl.name == "main" and not isinstance(decl, ast.Instantiation):
            raise P4Error(decl.loc, "main: must be a package declaration")
        if isinstance(decl, ast.ExternDecl):
            self._extern_members(decl)
        if isinstance(decl, ast.Instantiation):
            self._no_self_argument(decl.type_ref.name, decl.type_ref.args)
        for type_params, params in _param_lists(decl):
            seen: set[str] = set()
            for name in type_params:
                if name in seen:
                    raise P4Error(decl.loc, f"{name}: Duplicates declaration {name}")
                seen.add(name)
            seen = set()
            for p in params:
                if p.name in seen:
                    raise P4Error(p.loc, f"{p.name}: Duplicates declaration {p.name}")
                seen.add(p.name)
                self._declared(p.type_ref, type_params)
                self._tuple_fields(p.type_ref, type_params)
                if p.default is not None and p.direction in ("out", "inout"):
                    raise P4Error(p.loc, f"{p.name}: {p.direction} parameters cannot have default values")
                initializers.parameter_default(self.env, p)
                if _forbids_modules(decl, params):
                    self._module_param(p, type_params)
                if p.direction:
                    self._directed_param(p, type_params)
                elif params is getattr(decl, "ctor_params", None):
                    self._block_ctor_param(p)

    def _extern_members(self, decl: ast.ExternDecl) -> None:
        """p4c's rules on an extern's members: a constructor is named as the extern and has no return
        type, a method is not named as the extern, and returns no ``int``."""
        for ctor in decl.ctors:
            if ctor.name != decl.name:
                raise P4Error(ctor.loc, f"{ctor.name}: invalid type; method has no return type.")
        for method in decl.methods + decl.abstracts:
            if method.name == decl.name:
                raise P4Error(method.loc, f"{decl.name}: invalid constructor; cannot have a return type.")
            if method.return_type.kind == "infint":
                raise P4Error(method.return_type.loc, "int: illegal return type for method")
            _tuple_struct_fields(method.return_type)

    def _no_self_argument(self, name: str, args: list[ast.TypeRef]) -> None:
        for arg in args:
            if arg.kind == "named" and arg.name == name:
                raise P4Error(arg.loc, f"{name}: contains self '{name}' as type argument")
            self._no_self_argument(name, arg.args)

    def _declared(self, ref: ast.TypeRef, type_params: list[str]) -> None:
        """Every type a parameter's type names (its type arguments too) is declared before it."""
        if ref.kind == "error":
            self.env.decls.resolve_type(ref)  # p4c: with no error declared (no core.p4), none is found
        if ref.kind == "named" and ref.name not in self.env.types and ref.name not in type_params:
            raise P4Error(ref.loc, f"{ref.name}: declaration not found")
        _tuple_struct_fields(ref)
        for arg in ref.args:
            self._declared(arg, type_params)
            if ref.kind == "tuple" and arg.kind == "named" and arg.name not in type_params:
                self.env.decls.tuple_field(arg)

    def _tuple_fields(self, ref: ast.TypeRef, type_params: list[str]) -> None:
        """p4c's rules on a tuple type in a prototype: its TypeInference's (decls.Decls.tuple_field),
        then its midend's EliminateTuples, which makes a struct of the tuple (no string or int field)."""
        if ref.kind == "tuple" and not _names(ref) & set(type_params):
            t = self.env.decls.resolve_type(ref)
            for i, (arg, elem) in enumerate(zip(ref.args, t.elems)):
                if elem in (STRING, INFINT):  # the midend's EliminateTuples: a struct field of that type
                    err = P4Error(arg.loc, f"Field 'f{i}' of the struct for {t} cannot have type '{elem}'")
                    stages.defer(self.env, stages.ELIMINATE_TUPLES, err)
        for arg in ref.args:
            self._tuple_fields(arg, type_params)

    def _block_ctor_param(self, p: ast.Param) -> None:
        """A constructor parameter can have a parser/control *type*, never a parser/control itself."""
        t = self.env.types.get(p.type_ref.name) if p.type_ref.kind == "named" else None
        if isinstance(t, (ast.ParserDecl, ast.ControlDecl)):
            kind = "parser" if isinstance(t, ast.ParserDecl) else "control"
            raise P4Error(p.loc, f"{p.name}: parameter cannot have type {kind} {t.name}")

    def _module_param(self, p: ast.Param, type_params: list[str]) -> None:
        """p4c's checkParameters with forbidModules (apply parameters, an extern's constructor
        parameters): never a parser, a control or a package, with or without a direction (refused
        at the parameter's name)."""
        ref = p.type_ref
        t = self.env.types.get(ref.name) if ref.kind == "named" and ref.name not in type_params else None
        kind = "parser" if isinstance(t, ast.ParserDecl) else "control" if isinstance(t, ast.ControlDecl) \
            else t.kind if isinstance(t, ast.BlockTypeDecl) else None
        if kind is None:
            return
        where = find_after(p.loc, rf"\b{re.escape(p.name)}\b(?=\s*[,)=])")
        if kind == "package":
            raise P4Error(where, f"{p.name}: parameter cannot be a package")
        raise P4Error(where, f"{p.name}: parameter cannot have type {kind} {ref.name}")

    def _directed_param(self, p: ast.Param, type_params: list[str]) -> None:
        ref = p.type_ref
        if ref.kind == "string":
            raise P4Error(p.loc, f"{p.name}: a parameter with type string cannot have a direction")
        if ref.kind != "named" or ref.name in type_params:
            return
        t = self.env.types.get(ref.name)
        if isinstance(t, ExternT):
            t = t.decl
        if isinstance(t, ast.ExternDecl):
            raise P4Error(p.loc, f"{p.name}: a parameter with type {ref.name} cannot have a direction")
        if isinstance(t, (ast.BlockTypeDecl, ast.ParserDecl, ast.ControlDecl)):
            kind = t.kind if isinstance(t, ast.BlockTypeDecl) else "parser" if isinstance(t, ast.ParserDecl) \
                else "control"
            raise P4Error(p.loc, f"{p.name}: parameter cannot have type {kind} {ref.name}")

    def package_instances(self) -> None:
        """Every top-level instance of a package (target mode checks only its architecture's main)."""
        binds: dict[int, Binds] = {}  # a package instance -> its type parameters' bindings
        for decl in self.env.program.decls:
            if isinstance(decl, ast.Instantiation):
                t = decl.type
                is_package = isinstance(t, BlockT) and isinstance(t.decl, ast.BlockTypeDecl) \
                    and t.decl.kind == "package"
                if decl.name == "main" and not is_package:
                    raise P4Error(decl.loc, f"main: must be a package declaration, not {t}")
                if is_package:
                    binds[id(decl)] = self._package_instance(decl.loc, t.decl, decl.type_ref.args, decl.args, binds)
                    self._inferred(decl, t.decl)

    def _package_instance(self, loc: Any, package: ast.BlockTypeDecl, type_args: list[ast.TypeRef],
                          args: list[ast.Expr], binds: dict[int, Binds]) -> Binds:
        """``package<type_args>(args)``: its arguments unified with its parameters (packages.py);
        the bindings of its type parameters."""
        required = [p for p in package.params if not is_optional(p)]  # TNA's Switch: @optional pipes
        if any(isinstance(a, ast.NamedArg) for a in args) or len(args) < len(required):
            self.env.calls.normalize_args(loc, package.params, args)
        if len(args) > len(package.params):
            raise P4Error(package.loc, f"'package {package.name}' takes {len(package.params)} arguments, "
                          f"got {len(args)} at {loc}")
        given = zip(package.type_params, map(self.env.decls.resolve_type, type_args))
        unify = PackageTypes(self.env, package, {name: t for name, t in given if t is not DONTCARE})  # `P<_>`: inferred
        for param, arg in zip(package.params, args):
            self._package_argument(unify, param, arg, binds)
        return unify.binds

    def _inferred(self, main: ast.Instantiation, package: ast.BlockTypeDecl) -> None:
        """p4c's TypeInference: each type parameter of the package is bound by the arguments (or
        given): one a default argument names only as itself (``c = nothing<H>()``) stays unbound."""
        if main.type_ref.args:
            return
        bound: set[str] = set().union(*(_type_names(p.type_ref) for p in package.params[len(main.args):]))  # @optional
        for param, arg in zip(package.params, main.args):
            names = _type_names(param.type_ref)
            if arg is param.default and isinstance(arg, ast.CtorCall):
                names -= set().union(*(_type_names(a) for a in arg.type_ref.args))
            bound |= names
        for name in package.type_params:
            if name not in bound:
                raise P4Error(main.loc, f"{main.name}: could not infer a type for variable {name}")

    def _package_argument(self, unify: PackageTypes, param: ast.Param, arg: ast.Expr,
                          binds: dict[int, Binds]) -> None:
        if not isinstance(arg, ast.CtorCall):
            self.env.exprs.expr(arg, self.env.globals)  # a constant or an instance declared before main
            inst = arg.decl if isinstance(arg, ast.PathExpr) else None
            if isinstance(inst, ast.Instantiation) and isinstance(inst.type, BlockT):
                unify.argument(param, inst.type.decl, binds.get(id(inst)))
            elif not isinstance(inst, ast.Instantiation):
                unify.value(param, arg)
            return
        decl = self.env.types.get(arg.type_ref.name)
        if block_kind(decl) == "package":
            unify.argument(param, decl, None)
            unify.argument(param, decl, self._package_instance(arg.loc, decl, arg.type_ref.args, arg.args, binds))
            return
        if not isinstance(decl, (ast.ParserDecl, ast.ControlDecl)):
            if block_kind(self.env.types.get(param.type_ref.name)):
                raise P4Error(arg.loc, f"'{arg.type_ref.name}' is not a parser or control")
            self.env.exprs.expr(arg, self.env.globals)
            return
        unify.argument(param, decl, None)
        self.env.instances.block_instance(arg.loc, decl, arg.args, self.env.globals)

    def uninstantiated_blocks(self) -> None:
        """Every parser/control with constructor parameters that no instance checked, once."""
        checked = {key[0] for key in self.env.block_specs}
        for decl in self.env.program.decls:
            if isinstance(decl, (ast.ParserDecl, ast.ControlDecl)) and decl.ctor_params and not decl.type_params \
                    and id(decl) not in checked:
                self._generic_block(decl)

    def _generic_block(self, decl: ast.ParserDecl | ast.ControlDecl) -> None:
        values: dict[str, Any] = {}
        for p in decl.ctor_params:
            value = copy.copy(p)
            value.type = self.env.decls.resolve_type(p.type_ref)
            if p.name in values:
                raise P4Error(p.loc, f"'{p.name}' is already declared in this scope")
            values[p.name] = value
        spec = copy.deepcopy(decl)  # the declaration itself stays unannotated, as in instances.py
        spec.ctor_params = []
        self.env.blocks.block(spec, None, decl, values)
