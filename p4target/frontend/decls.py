"""Top-level declarations and the types that type references name (a pass of the checker, env.py).

Errors, match kinds, typedefs, headers, structs, enums, externs, parsers/controls, constants,
actions, functions and instances at the top level, in source order; ``resolve_type`` turns
a written type into a ``types.Type``.
"""

from __future__ import annotations

import re
from typing import Any

from . import ast, limits, stages
from .anchors import at_outer, instance_loc, name_loc
from .env import Pass
from .errors import Location, P4Error
from .generics import (
    check_return_type,
    check_type_arg,
    contains_self,
    is_generic,
    prototype_specializations,
    specialized_name,
    template_field,
)
from .profiles import PROFILE_EXTERNS
from .scope import Scope
from .source_text import find_after
from .tna import TNA_EXTERNS
from .types import (
    BOOL,
    DONTCARE,
    ERROR,
    INFINT,
    MATCH_KIND,
    STRING,
    VOID,
    BitsT,
    BlockT,
    EnumT,
    ExternT,
    HeaderT,
    ListT,
    StackT,
    TupleT,
    Type,
    TypeVar,
    VarbitT,
    bit_width,
    is_bits_struct,
    is_header_stack,
    wrap,
)

# Externs whose semantics the executor implements; any other extern is rejected.
SUPPORTED_EXTERNS = {"packet_in", "packet_out", "register", "counter", "direct_counter", "meter", "direct_meter",
                     *PROFILE_EXTERNS,
                     *TNA_EXTERNS}


def _list_value(e: ast.Expr) -> tuple:
    """A constant list's (or struct initialiser's) item values, in field order."""
    if isinstance(e, ast.Cast):
        e = e.operand
    assert isinstance(e, ast.ListExpr)
    return tuple(i.value if i.value is not None else _list_value(i) for i in e.items)


def _constant_list(e: ast.Expr) -> bool:
    """A struct initialiser of constants (TNA's ``Register(size, {0, 0})``)."""
    if isinstance(e, ast.Cast) and isinstance(e.type, ListT):  # (list<T>) { ... }
        e = e.operand
    return isinstance(e, ast.ListExpr) and all(i.value is not None or _constant_list(i) for i in e.items)


_BASE_TYPES: dict[str, Type] = {"string": STRING, "void": VOID, "match_kind": MATCH_KIND, "infint": INFINT}


class Decls(Pass):
    """Declarations and type references."""

    def top_level(self, decl: ast.Decl) -> None:
        self._structured_annotations(getattr(decl, "annotations", []))
        if isinstance(decl, ast.ErrorDecl):
            for i, name in enumerate(decl.members):
                if name in self.env.errors:  # p4c: at this (the second) declaration
                    raise P4Error(_member_loc(decl, name, decl.members[:i].count(name)),
                                  f"{name}: Duplicates declaration {name}")
                self.env.errors.append(name)
        elif isinstance(decl, ast.MatchKindDecl):
            for i, name in enumerate(decl.members):
                if name in self.env.match_kinds or name in decl.members[:i]:  # p4c: at the second
                    raise P4Error(_member_loc(decl, name, decl.members[:i].count(name)),
                                  f"{name}: Duplicates declaration {name}")
            self.env.match_kinds.update(decl.members)
        elif isinstance(decl, ast.Typedef):
            self._typedef(decl)
        elif isinstance(decl, ast.HeaderDecl):
            self._header(decl)
        elif isinstance(decl, ast.EnumDecl):
            self._enum(decl)
        elif isinstance(decl, (ast.ExternDecl, ast.BlockTypeDecl)):
            _overloads_distinct(decl)
            for method in getattr(decl, "methods", []) + getattr(decl, "abstracts", []):
                check_return_type(method, self.env.types)
            self._prototype_specializations(decl)
            self._declare_type(decl, decl)
        elif isinstance(decl, ast.ExternFunction):
            check_return_type(decl.proto, self.env.types)
            self._prototype_specializations(decl)
            if isinstance(self.env.globals.values.get(decl.name), ast.ExternFunction):
                self.env.overloads.setdefault(decl.name, [self.env.globals.values[decl.name]]).append(decl)
            else:
                self.env.globals.declare(decl)
        elif isinstance(decl, (ast.ParserDecl, ast.ControlDecl)):
            self._declare_type(decl, decl)
            if decl.type_params:
                self.env.blocks.generic_block(decl)
            elif not decl.ctor_params:  # else checked per instance, with its arguments (instances.py)
                self.env.blocks.block(decl)
        elif isinstance(decl, ast.ConstDecl):
            self.const_decl(decl, self.env.globals)
            self.env.globals.declare(decl)
        elif isinstance(decl, ast.ActionDecl):
            self.env.globals.declare(decl)
            self.env.blocks.action(decl, self.env.globals)
        elif isinstance(decl, ast.FunctionDecl):
            self.env.calls.function(decl, self.env.globals)
        elif isinstance(decl, ast.Instantiation):
            self.instantiation(decl, self.env.globals)
            self.env.globals.declare(decl)
        else:
            raise P4Error(decl.loc, f"{type(decl).__name__} is not supported at top level")

    def _prototype_specializations(self, decl: ast.Decl) -> None:
        """Each generic struct or header a prototype specializes, checked as p4c does (generics.py)."""
        for tparams, ref in prototype_specializations(decl, self.env.types):
            saved = self.env.type_vars
            self.env.type_vars = {**saved, **{p: TypeVar(p) for p in tparams}}
            try:
                self.resolve_type(ref)
            finally:
                self.env.type_vars = saved

    def _typedef(self, decl: ast.Typedef) -> None:
        t = self.resolve_type(decl.type_ref)
        if decl.newtype and not (isinstance(t, BitsT) or t is BOOL):  # p4c's TypeInference on Type_Newtype
            raise P4Error(find_after(decl.type_ref.loc, rf"\b{re.escape(decl.name)}\b"),
                          f"{decl.name}: `type' can only be applied to base types")
        if decl.newtype and isinstance(t, BitsT):  # a `type` keeps its name for P4Runtime (p4info.py)
            t = BitsT(t.width, t.signed, decl)
        self._declare_type(decl, t)

    def _structured_annotations(self, annotations: list[ast.Annotation]) -> None:
        """p4c's TypeInference types a structured annotation's expressions: comparing two extern
        instances there is refused (the one rule on them checked here)."""
        todo = [a for a in annotations if a.structured]
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Binary) and node.op in ("==", "!="):
                sides = [self.env.globals.lookup(x.name) if isinstance(x, ast.PathExpr) else None
                         for x in (node.left, node.right)]
                if any(isinstance(d, ast.Instantiation) and isinstance(d.type, ExternT) for d in sides):
                    raise P4Error(node.left.loc, f"{ast.text(node.left)} and {ast.text(node.right)}: "
                                  "externs cannot be compared")
            todo += ast.children(node.args if isinstance(node, ast.Annotation) else node)

    def _declare_type(self, decl: ast.Decl, t: Any) -> None:
        if decl.name in self.env.types:
            raise P4Error(decl.loc, f"type '{decl.name}' is already declared")
        self.env.types[decl.name] = t

    def _match_annotation(self, f: ast.Field) -> None:
        """p4c's ValidateMatchAnnotations (after its type checker): a field's @match is a match_kind."""
        note = ast.find_annotation(f.annotations, "match")
        if note is None or len(note.args) != 1 or not isinstance(note.args[0], ast.Expr):
            return
        arg = note.args[0]
        if isinstance(arg, ast.PathExpr):
            if arg.name in self.env.match_kinds or self.env.globals.lookup(arg.name) is None:
                return
        try:
            self.env.exprs.expr(arg, self.env.globals)
        except P4Error:
            return
        shown = ast.text(arg) if arg.value is None else str(arg.value)
        err = P4Error(arg.loc, f"{shown}: value must be a match_kind")
        stages.defer(self.env, stages.VALIDATE_MATCH_ANNOTATIONS, err)

    def _length_names(self, decl: ast.HeaderDecl) -> None:
        """p4c's ResolveReferences on a field's @length: it names earlier fields or globals."""
        for i, f in enumerate(decl.fields):
            note = ast.find_annotation(f.annotations, "length")
            todo = [a for a in note.args if isinstance(a, ast.Node)] if note is not None else []
            while todo:
                node = todo.pop(0)
                if isinstance(node, ast.PathExpr) and node.name not in {x.name for x in decl.fields[:i]} \
                        and self.env.globals.lookup(node.name) is None:
                    raise P4Error(node.loc, f"{node.name}: declaration not found")
                todo += ast.children(node)

    def _header(self, decl: ast.HeaderDecl) -> None:
        if decl.type_params:  # generic: its template is checked with its type variables unbound
            self._declare_type(decl, decl)
            saved, self.env.type_vars = self.env.type_vars, {p: TypeVar(p) for p in decl.type_params}
            try:
                self._fields(decl, HeaderT(decl.name, decl.kind, decl=decl))
            finally:
                self.env.type_vars = saved
            return
        t = HeaderT(decl.name, decl.kind, decl=decl)
        self._declare_type(decl, t)
        self._length_names(decl)
        self._fields(decl, t)

    def _fields(self, decl: ast.HeaderDecl, t: HeaderT) -> None:
        """A declaration's fields, resolved and checked (p4c's validateFields), into ``t``; a
        specialization's (``S<bit<8>>``) with its type variables bound in ``env.type_vars``."""
        for f in decl.fields:
            if f.name in t.fields:
                raise P4Error(f.loc, f"field '{f.name}' is declared twice in {decl.name}")
            itself = _self_reference(f.type_ref, decl.name)
            if itself is not None:  # p4c's ResolveReferences
                raise P4Error(itself.loc, f"Self-referencing types not supported: '{decl.name}' within "
                              f"'{decl.kind} {decl.name}'")
            ft = self.resolve_type(f.type_ref)
            self._match_annotation(f)
            if not template_field(ft):
                self._field_type(decl, t, f, ft)
            t.fields[f.name] = ft
        nested = next((f for f in decl.fields if isinstance(t.fields[f.name], HeaderT)), None)
        if t.is_header and nested is not None and t.varbit_field is not None:
            raise P4Error(nested.loc, f"a struct field ('{nested.name}') in a header with a varbit field is not "
                          "supported by the built-in target")

    def _field_type(self, decl: ast.HeaderDecl, t: HeaderT, f: ast.Field, ft: Type) -> None:
        """Whether a field may have its type in a struct, header or header_union (p4c's validators)."""
        def wrong() -> P4Error:  # at the field's name, as p4c
            return P4Error(find_after(f.loc, rf"\b{re.escape(f.name)}\s*;"),
                           f"Field '{f.name}' of '{decl.kind} {decl.name}' cannot have type '{shown}'")

        shown = f"{ft.kind} {ft}" if isinstance(ft, HeaderT) and not isinstance(ft, TupleT) else ft

        if isinstance(ft, TupleT) and DONTCARE in ft.elems:  # p4c: once its midend makes the tuple a struct
            raise P4Error(f.loc, f"Field 'f{ft.elems.index(DONTCARE)}' of '{ft}' cannot have type '_'")
        if decl.kind == "header_union":
            if not (isinstance(ft, HeaderT) and ft.is_header):
                raise wrong()
        elif isinstance(ft, VarbitT):
            if decl.kind != "header":  # p4c allows it in a struct; the built-in target keeps varbits in headers
                if not self.env.frontend:
                    stages.defer(self.env, stages.TARGET, P4Error(
                        f.loc, f"a varbit field ('{f.name}') in a struct is not supported by the built-in target"))
            elif t.varbit_field is not None:  # p4c's type checker, at the first one
                first = next(x for x in decl.fields if x.name == t.varbit_field)
                raise P4Error(first.loc, f"{first.name} and {f.name}: multiple varbit fields in a header")
        elif decl.kind == "header" and isinstance(ft, HeaderT) and ft.kind == "struct":
            # p4c's type checker allows a struct of bit-typed fields; its midend (FlattenHeaders)
            # puts the struct's fields in the header in their place, and so do wire_fields.
            if not is_bits_struct(ft):
                raise wrong()
        elif decl.kind == "header":
            try:
                bit_width(ft)
            except TypeError:
                raise wrong() from None
            if isinstance(ft, HeaderT):
                raise wrong()
        elif isinstance(ft, (ExternT, BlockT)) or ft in (INFINT, STRING, VOID, DONTCARE):
            raise wrong()

    def _enum(self, decl: ast.EnumDecl) -> None:
        t = EnumT(decl.name, list(decl.members))
        if decl.underlying is not None:
            under = self.resolve_type(decl.underlying)
            if not isinstance(under, BitsT) or under.newtype is not None:  # p4c: at the type
                note = "; note that the used type is unsized integral type" if under is INFINT else \
                    "; note that type-declared types are not allowed even if they are fixed-size" \
                    if isinstance(under, BitsT) else ""
                raise P4Error(decl.underlying.loc, f"{decl.underlying.name or under}: Illegal type for enum; "
                              f"only bit<> and int<> are allowed{note}")
            t.underlying = under
            for name, expr in zip(decl.members, decl.values or []):
                self.env.exprs.expr(expr, self.env.globals)
                t.values[name] = wrap(self.env.exprs.const_int(expr), under)
        twice = next((name for i, name in enumerate(t.members) if name in t.members[:i]), None)
        if twice is not None:  # p4c: at the second
            raise P4Error(_member_loc(decl, twice, 1), f"{twice}: Duplicates declaration {twice}")
        self._declare_type(decl, t)

    def const_decl(self, decl: ast.ConstDecl, scope: Scope) -> None:
        decl.type = self.resolve_type(decl.type_ref)
        self.env.exprs.expr(decl.init, scope)
        if decl.type is INFINT and isinstance(decl.init.type, BitsT) and decl.init.value is not None:
            decl.init.type = INFINT  # p4c unifies int with any width: the constant keeps its value
        with at_outer(lambda: name_loc(decl.loc, decl.name), lambda: decl.name):  # p4c: at the declaration ('x')
            self.env.exprs.coerce(decl.init, decl.type, "constant initializer")
        if decl.init.value is None and _constant_list(decl.init):  # a struct or tuple of constants
            if not self.env.frontend:  # p4c's errors on its uses come first
                stages.defer(self.env, stages.TARGET, P4Error(
                    decl.init.loc, f"a constant of type {decl.type} is not supported by the built-in target"))
            else:  # its fields' values, in order, for the frontend's constant folding
                decl.init.value = _list_value(decl.init)
        elif decl.init.value is None:
            raise P4Error(decl.init.loc, f"the initializer of constant '{decl.name}' is not a compile-time constant")

    def _inferred_extern(self, decl: ast.Instantiation, scope: Scope) -> ExternT | None:
        """``Random(16w256) r;``: an extern's type arguments left out, inferred from its
        constructor's arguments (p4c's unification); None when they are written."""
        ref = decl.type_ref
        ext = self.env.types.get(ref.name) if ref.kind == "named" else None
        if not (isinstance(ext, ast.ExternDecl) and ext.type_params and not ref.args):
            return None
        ctor = next((c for c in ext.ctors if self.env.calls.arity_fits(c.params, decl.args)), None)
        if ctor is None:
            return None
        for a in decl.args:
            if not isinstance(a, ast.Default):
                self.env.exprs.expr(a.arg if isinstance(a, ast.NamedArg) else a, scope)
        bindings: dict[str, Type] = {}
        self.env.calls.check_args(decl.loc, ctor.params, decl.args, bindings, ext.type_params)
        missing = [tp for tp in ext.type_params if tp not in bindings]
        if missing:
            raise P4Error(decl.loc, f"{decl.name}: could not infer a type for variable {missing[0]}")
        return ExternT(ext, tuple(bindings[tp] for tp in ext.type_params))

    def instantiation(self, decl: ast.Instantiation, scope: Scope) -> None:
        t = self._inferred_extern(decl, scope) or self.resolve_type(decl.type_ref)
        decl.type = t
        if isinstance(t, BlockT) and decl.initializer is not None:
            self._block_initializer(decl)
        if isinstance(t, BlockT) and isinstance(t.decl, ast.BlockTypeDecl) and t.decl.kind == "package":
            return  # the package's arguments are constructor calls: _pipeline checks them
        if isinstance(t, BlockT) and isinstance(t.decl, (ast.ControlDecl, ast.ParserDecl)):
            if scope is self.env.globals:  # p4c's TypeInference: only a package is instantiated there
                raise P4Error(decl.loc, f"{decl.name}: cannot instantiate at top-level")
            if t.decl.type_params:
                self.env.blocks.generic_instance(decl, t, scope)
                return
            # its arguments are checked against the parameters' types
            self.env.instances.block_instantiation(decl, t, scope)
            return
        for f in decl.initializer or []:
            if isinstance(f, ast.FunctionDecl):
                _type_params_distinct(f)
        for a in decl.args:
            self.env.exprs.expr(a, scope)
        if isinstance(t, ExternT):
            name = t.decl.name
            if name not in SUPPORTED_EXTERNS and not self.env.frontend:
                raise P4Error(decl.loc, f"extern '{name}' is not supported by the built-in target")
            ctor = next((c for c in t.decl.ctors if len(c.params) == len(decl.args)), None)
            if ctor is None:
                raise P4Error(decl.loc, f"no constructor of {name} takes {len(decl.args)} arguments")
            with at_outer(lambda: instance_loc(decl.loc, decl.name)):  # p4c: at the instance ('e')
                self.env.calls.check_args(decl.loc, ctor.params, decl.args, dict(zip(t.decl.type_params, t.args)))
            for a in decl.args:
                if a.value is None and not isinstance(a.type, ExternT) and not _constant_list(a) \
                        and not _generic_param(a):
                    raise P4Error(a.loc, "constructor arguments must be compile-time constants")
            limits.extern_sizes(decl, ctor.params)
            if decl.initializer or t.decl.abstracts or (name in TNA_EXTERNS and self.env.target_rules(t.decl)):
                self.env.tna.extern_initializer(decl, t, scope)
        else:
            raise P4Error(decl.loc, f"cannot instantiate {t} here")

    def _block_initializer(self, decl: ast.Instantiation) -> None:
        """p4c's TypeInference: only an extern instance has an initializer (its abstract methods),
        after its ResolveReferences found the types the initializer's functions name."""
        for f in decl.initializer or []:
            if isinstance(f, ast.FunctionDecl):
                for ref in [f.proto.return_type, *(p.type_ref for p in f.proto.params)]:
                    if ref.kind != "named" or ref.name not in f.proto.type_params:
                        self.resolve_type(ref)
        raise P4Error(find_after(decl.loc, rf"\b{re.escape(decl.name)}\s*=\s*(\{{)", group=1),
                      "BlockStatement: initializers only allowed for extern instances")  # p4c's words

    # ---------------------------------------------------------------- types
    def resolve_type(self, ref: ast.TypeRef) -> Type:
        k = ref.kind
        if k == "bool":
            return BOOL
        if k == "error":
            if not any(isinstance(d, ast.ErrorDecl) for d in self.env.program.decls):
                raise P4Error(ref.loc, "error: declaration not found")  # p4c: `error` names core.p4's declaration
            return ERROR
        if k in _BASE_TYPES:
            return _BASE_TYPES[k]
        if k == "dontcare":  # p4c infers it; a value whose type stays '_' is refused where used (calls.py)
            if not self.env.frontend:
                stages.defer(self.env, stages.TARGET, P4Error(
                    ref.loc, "the don't-care type '_' as a type argument is not supported by the built-in target"))
            return DONTCARE
        if k in ("bit", "int"):
            self.env.exprs.expr(ref.width, self.env.globals)
            width = limits.type_width(ref, self.env.exprs.const_int(ref.width))
            if width <= 0 and not (width == 0 and k == "bit" and self.env.frontend):  # p4c takes bit<0>
                raise P4Error(ref.loc, f"{k}<{width}>: width must be positive")
            return BitsT(width, k == "int")
        if k == "varbit":
            self.env.exprs.expr(ref.width, self.env.globals)
            width = limits.type_width(ref, self.env.exprs.const_int(ref.width))
            if width <= 0:
                raise P4Error(ref.loc, f"varbit<{width}>: width must be positive")
            return VarbitT(width)
        if k == "tuple":
            return TupleT.of([self.tuple_field(a) for a in ref.args])
        if k == "list":
            if len(ref.args) != 1:
                raise P4Error(ref.loc, f"{ast.type_text(ref)}: Type list has 1 type parameter(s), but it is "
                              f"specialized with {len(ref.args)}")
            if not self.env.frontend:  # p4c's type errors on its values come first
                stages.defer(self.env, stages.TARGET, P4Error(
                    ref.loc, "the type list<T> is not supported by the built-in target"))
            return ListT(self.resolve_type(ref.args[0]))
        if k == "stack":
            elem = self.resolve_type(ref.args[0])
            self.env.exprs.expr(ref.width, self.env.globals)
            size = limits.stack_size(ref, self.env.exprs.const_int(ref.width))
            if size < 0:  # p4c's Type_Array::getSize
                raise P4Error(ref.width.loc, f"Illegal array size: {size}")
            if size <= 0:
                raise P4Error(ref.loc, "a header stack needs a positive size")
            if not is_header_stack(elem):  # P4-16 1.2.4 arrays: p4c's type errors on their uses come first
                self.env.midend.append((stages.TARGET, P4Error(
                    ref.loc, f"arrays of {elem} are not supported by the built-in target (only header stacks)"), None))
            return StackT(elem, size)
        return self._resolve_named(ref)

    def _resolve_named(self, ref: ast.TypeRef) -> Type:
        """A type declared by name (a type variable bound here, a declared type, a specialised
        extern, parser, control or package)."""
        if ref.name in self.env.type_vars:
            return self.env.type_vars[ref.name]
        t = self.env.types.get(ref.name)
        if t is None:
            raise P4Error(ref.loc, f"unknown type '{ref.name}'")
        if isinstance(t, ast.ExternDecl):
            args = tuple(self.resolve_type(a) for a in ref.args)
            if len(args) != len(t.type_params):
                raise P4Error(ref.loc, f"{ast.type_text(ref)}: Type {t.name} has {len(t.type_params)} type "
                              f"parameter(s), but it is specialized with {len(args)}")
            if any(_contains_extern(a, t) for a in args):  # p4c's TypeInference (Type_Specialized)
                raise P4Error(ref.loc, f"{t.name}: contains self '{t.name}' as type argument")
            return ExternT(t, args)
        if is_generic(t):
            return self._specialize(t, ref)
        package = isinstance(t, ast.BlockTypeDecl) and t.kind == "package"
        generic = isinstance(t, (ast.ParserDecl, ast.ControlDecl)) and t.type_params  # blocks.generic_instance
        if ref.args and (package or generic) and len(ref.args) != len(t.type_params):
            raise P4Error(ref.loc, f"{ast.type_text(ref)}: Type {t.name} has {len(t.type_params)} type "
                          f"parameter(s), but it is specialized with {len(ref.args)}")
        if ref.args and not (package or generic):
            raise P4Error(ref.loc, f"type '{ref.name}' takes no type arguments")
        if isinstance(t, (ast.ParserDecl, ast.ControlDecl, ast.BlockTypeDecl)):
            return BlockT(t)
        return t

    def tuple_field(self, ref: ast.TypeRef) -> Type:
        """p4c's TypeInference of a tuple type: no extern, parser, control or package in it."""
        t = self.resolve_type(ref)
        if isinstance(t, (ExternT, BlockT)):
            raise P4Error(ref.loc, f"{ast.type_text(ref)}: not supported as a tuple field")
        return t

    def _specialize(self, decl: ast.HeaderDecl, ref: ast.TypeRef) -> HeaderT:
        """``S<A, ...>``: the generic declaration with its type variables bound, one type per
        distinct list of arguments, its fields checked as an ordinary declaration's."""
        if not ref.args:
            raise P4Error(ref.loc, f"{ref.name}: no type parameters supplied for generic type")
        if len(ref.args) != len(decl.type_params):
            raise P4Error(ref.loc, f"{ast.type_text(ref)}: Type {decl.kind} {decl.name} has {len(decl.type_params)} "
                          f"type parameter(s), but it is specialized with {len(ref.args)}")
        args: list[Type] = []
        for a in ref.args:
            check_type_arg(decl, ref, a, self.env.types.get(a.name) if a.kind == "named" else None)
            at = self.resolve_type(a)
            if contains_self(at, decl) and a.name not in self.env.generic_names:  # p4c: a type variable there
                raise P4Error(ref.loc, f"{decl.name}: contains self '{decl.kind} {decl.name}' as type argument")
            args.append(at)
        key = (decl, tuple(args))
        t = self.env.specialized.get(key)
        if t is None:
            t = self.env.specialized[key] = HeaderT(specialized_name(decl, args), decl.kind, decl=decl)
            saved, self.env.type_vars = self.env.type_vars, dict(zip(decl.type_params, args))
            try:
                self._fields(decl, t)
            finally:
                self.env.type_vars = saved
        return t


def _self_reference(ref: ast.TypeRef, name: str) -> ast.TypeRef | None:
    """Where a type reference names the type ``name`` (itself or in a type argument or element)."""
    if ref.kind == "named" and ref.name == name:
        return ref
    return next((r for r in (_self_reference(a, name) for a in ref.args) if r is not None), None)


def _type_params_distinct(f: ast.FunctionDecl) -> None:
    """p4c: a function's type parameter named twice is refused at the second."""
    params = f.proto.type_params
    twice = next((n for i, n in enumerate(params) if n in params[:i]), None)
    if twice is not None:
        start = find_after(f.loc, rf"\b{re.escape(f.name)}\s*<")
        raise P4Error(find_after(start, rf"\b{re.escape(twice)}\b", 1), f"{twice}: Duplicates declaration {twice}")


def _contains_extern(t: Any, ext: ast.ExternDecl) -> bool:
    """Whether a type argument mentions the extern it specialises: as itself, in its type
    arguments, in a struct's fields or in a parser's or control's parameter types."""
    if isinstance(t, ExternT):
        return t.decl is ext or any(_contains_extern(a, ext) for a in t.args)
    if isinstance(t, HeaderT):
        return any(_contains_extern(f, ext) for f in t.fields.values())
    if isinstance(t, BlockT):
        params = [*getattr(t.decl, "params", []), *getattr(t.decl, "ctor_params", [])]
        return any(_mentions(p.type_ref, ext.name) for p in params)
    return False


def _mentions(ref: ast.TypeRef, name: str) -> bool:
    return ref.kind == "named" and ref.name == name or any(_mentions(a, name) for a in ref.args)


def _generic_param(e: ast.Expr) -> bool:
    """A constructor parameter of a block checked generically (blocks.generic_block): a
    compile-time constant for p4c, with no value until an instance binds it."""
    return isinstance(e, ast.PathExpr) and isinstance(e.decl, ast.Param) and e.decl.direction == ""


def _member_loc(decl: ast.Decl, name: str, nth: int) -> Location:
    """Where the ``nth`` ``name`` (0: the first) is written in the braces of an enum or error."""
    brace = find_after(decl.loc, r"\{")
    return find_after(Location(brace.file, brace.line, brace.col + 1), rf"\b{re.escape(name)}\b", nth)


def _overloads_distinct(decl: ast.ExternDecl | ast.BlockTypeDecl) -> None:
    """p4c's ValidateOverloadedMethods: two methods (or constructors) of one extern with the same
    name and the same parameter names can never be told apart, so the second is a duplicate."""
    if not isinstance(decl, ast.ExternDecl):
        return
    methods = sorted([*decl.ctors, *decl.methods, *decl.abstracts], key=lambda m: (m.loc.line, m.loc.col))
    for i, other in enumerate(methods):
        names = sorted(p.name for p in other.params)
        first = next((m for m in methods[:i] if m.name == other.name and sorted(p.name for p in m.params) == names),
                     None)
        if first is not None:
            raise P4Error(other.loc, f"Duplicate declaration of {other.name}: previous declaration at ")


_TYPE_DECLS = (ast.Typedef, ast.HeaderDecl, ast.EnumDecl, ast.ExternDecl, ast.BlockTypeDecl, ast.ParserDecl,
               ast.ControlDecl)
_VALUE_DECLS = (ast.ConstDecl, ast.ExternFunction, ast.ValueSetDecl, ast.ActionDecl,
                ast.FunctionDecl)  # not instances: p4c judges them later


def top_level_kinds(program: ast.Program) -> None:
    """p4c's parser (its symbol table, before any pass): a top-level name is a type or a value,
    never both; the second declaration is refused."""
    kinds: dict[str, bool] = {}
    for decl in program.decls:
        if isinstance(decl, _TYPE_DECLS) or isinstance(decl, _VALUE_DECLS):
            is_type = isinstance(decl, _TYPE_DECLS)
            if kinds.setdefault(decl.name, is_type) != is_type:
                raise P4Error(decl.loc, f"Re-declaration of {decl.name} with different type: ")
