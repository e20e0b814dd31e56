"""Top-level declarations and the types that type references name (a pass of the checker, env.py).

Errors, match kinds, typedefs, headers, structs, enums, externs, parsers/controls, constants,
actions, functions and instances at the top level, in source order; ``resolve_type`` turns
a written type into a ``types.Type``.
"""

from __future__ import annotations

import re
from typing import Any

from . import ast, limits, stages
from .env import Pass
from .errors import Location, P4Error
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


class Decls(Pass):
    """Declarations and type references."""

    def top_level(self, decl: ast.Decl) -> None:
        if isinstance(decl, ast.ErrorDecl):
            for i, name in enumerate(decl.members):
                if name in self.env.errors:  # p4c: at this (the second) declaration
                    raise P4Error(_member_loc(decl, name, decl.members[:i].count(name)),
                                  f"{name}: Duplicates declaration {name}")
                self.env.errors.append(name)
        elif isinstance(decl, ast.MatchKindDecl):
            self.env.match_kinds.update(decl.members)
        elif isinstance(decl, ast.Typedef):
            t = self.resolve_type(decl.type_ref)
            if decl.newtype and not (isinstance(t, BitsT) or t is BOOL):  # p4c's TypeInference (Type_Newtype)
                raise P4Error(find_after(decl.loc, rf"\b{re.escape(decl.name)}\b"),
                              f"{decl.name}: `type' can only be applied to base types")
            if decl.newtype and isinstance(t, BitsT):  # a `type` keeps its name for P4Runtime (p4info.py)
                t = BitsT(t.width, t.signed, decl)
            self._declare_type(decl, t)
        elif isinstance(decl, ast.HeaderDecl):
            self._header(decl)
        elif isinstance(decl, ast.EnumDecl):
            self._enum(decl)
        elif isinstance(decl, (ast.ExternDecl, ast.BlockTypeDecl)):
            _overloads_distinct(decl)
            self._declare_type(decl, decl)
        elif isinstance(decl, ast.ExternFunction):
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

    def _header(self, decl: ast.HeaderDecl) -> None:
        t = HeaderT(decl.name, decl.kind, decl=decl)
        self._declare_type(decl, t)
        for f in decl.fields:
            if f.name in t.fields:
                raise P4Error(f.loc, f"field '{f.name}' is declared twice in {decl.name}")
            ft = self.resolve_type(f.type_ref)
            self._match_annotation(f)
            if decl.kind == "header_union":
                if not (isinstance(ft, HeaderT) and ft.is_header):
                    raise P4Error(f.loc, f"header_union field '{f.name}' must be a header, not {ft}")
            elif isinstance(ft, VarbitT):
                if decl.kind != "header":
                    raise P4Error(f.loc, "varbit fields are only allowed in headers")
                if t.varbit_field is not None:
                    raise P4Error(f.loc, "varbit in a header with another varbit field is not supported by the "
                                  "built-in target")
            elif decl.kind == "header" and isinstance(ft, HeaderT) and ft.kind == "struct":
                # p4c's type checker allows a struct of bit-typed fields; its midend (FlattenHeaders)
                # puts the struct's fields in the header in their place, and so do wire_fields.
                if not is_bits_struct(ft):
                    raise P4Error(f.loc, f"Field '{f.name}' of '{decl.name}' cannot have type '{ft}'")
            elif decl.kind == "header":
                try:
                    bit_width(ft)
                except TypeError:
                    raise P4Error(f.loc, f"header field '{f.name}' has type {ft}, which has no fixed width") from None
                if isinstance(ft, HeaderT):
                    raise P4Error(f.loc, "a header cannot contain a header")
            elif isinstance(ft, (ExternT, BlockT)):
                raise P4Error(f.loc, f"struct field '{f.name}' cannot have type {ft}")
            t.fields[f.name] = ft
        nested = next((f for f in decl.fields if isinstance(t.fields[f.name], HeaderT)), None)
        if t.is_header and nested is not None and t.varbit_field is not None:
            raise P4Error(nested.loc, f"a struct field ('{nested.name}') in a header with a varbit field is not "
                          "supported by the built-in target")

    def _enum(self, decl: ast.EnumDecl) -> None:
        t = EnumT(decl.name, list(decl.members))
        if decl.underlying is not None:
            under = self.resolve_type(decl.underlying)
            if isinstance(under, BitsT) and under.newtype is not None:  # p4c's TypeInference (Type_SerEnum)
                raise P4Error(decl.underlying.loc, f"{ast.type_text(decl.underlying)}: Illegal type for enum; only "
                              "bit<> and int<> are allowed; note that type-declared types are not allowed even if "
                              "they are fixed-size")
            if not isinstance(under, BitsT):
                raise P4Error(decl.loc, "a serializable enum needs a bit<W> or int<W> underlying type")
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
        if decl.initializer is not None and not isinstance(t, ExternT):  # p4c's TypeInference
            for f in decl.initializer:  # its names are resolved first (ResolveReferences)
                if isinstance(f, ast.FunctionDecl):
                    self.resolve_type(f.proto.return_type)
            raise P4Error(decl.loc, "BlockStatement: initializers only allowed for extern instances")
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
        for a in decl.args:
            self.env.exprs.expr(a, scope)
        if isinstance(t, ExternT):
            name = t.decl.name
            if name not in SUPPORTED_EXTERNS and not self.env.frontend:
                raise P4Error(decl.loc, f"extern '{name}' is not supported by the built-in target")
            ctor = next((c for c in t.decl.ctors if len(c.params) == len(decl.args)), None)
            if ctor is None:
                raise P4Error(decl.loc, f"no constructor of {name} takes {len(decl.args)} arguments")
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

    # ---------------------------------------------------------------- types
    def resolve_type(self, ref: ast.TypeRef) -> Type:
        k = ref.kind
        if k == "bool":
            return BOOL
        if k == "error":
            if not any(isinstance(d, ast.ErrorDecl) for d in self.env.program.decls):  # no core.p4
                raise P4Error(ref.loc, "error: declaration not found")
            return ERROR
        if k == "string":
            return STRING
        if k == "void":
            return VOID
        if k == "match_kind":
            return MATCH_KIND
        if k == "infint":
            return INFINT
        if k == "dontcare":  # p4c infers it; a value whose type stays '_' is refused where used (calls.py)
            if not self.env.frontend:
                stages.defer(self.env, stages.TARGET, P4Error(
                    ref.loc, "the don't-care type '_' as a type argument is not supported by the built-in target"))
            return DONTCARE
        if k in ("bit", "int"):
            self.env.exprs.expr(ref.width, self.env.globals)
            width = limits.type_width(ref, self.env.exprs.const_int(ref.width))
            if width <= 0:
                raise P4Error(ref.loc, f"{k}<{width}>: width must be positive")
            return BitsT(width, k == "int")
        if k == "varbit":
            self.env.exprs.expr(ref.width, self.env.globals)
            width = limits.type_width(ref, self.env.exprs.const_int(ref.width))
            if width <= 0:
                raise P4Error(ref.loc, f"varbit<{width}>: width must be positive")
            return VarbitT(width)
        if k == "tuple":
            elems = [self.resolve_type(a) for a in ref.args]
            for a, t in zip(ref.args, elems):
                tuple_field(a, t.decl if isinstance(t, (ExternT, BlockT)) else t)
            return TupleT.of(elems)
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


def tuple_field(ref: ast.TypeRef, t: Any) -> None:
    """p4c's TypeInference (Type_Tuple): no extern, parser, control or package as a tuple field."""
    if isinstance(t, (ast.ExternDecl, ast.BlockTypeDecl, ast.ParserDecl, ast.ControlDecl)):
        raise P4Error(ref.loc, f"{ast.type_text(ref)}: not supported as a tuple field")


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
