"""Generic structs, headers and header_unions (``struct S<T> {...}``): what p4c's ResolveReferences
and TypeInference say about a declaration and its specializations (``S<bit<8>>``), before the
specialized fields are checked with the rules of ordinary ones (decls.py)."""

from __future__ import annotations

import re
from typing import Any

from . import ast
from .errors import P4Error
from .source_text import find_after
from .types import HeaderT, StackT, TupleT, Type, TypeVar


def is_generic(t: Any) -> bool:
    """A generic struct, header or header_union declaration (its type is made per specialization)."""
    return isinstance(t, ast.HeaderDecl) and bool(t.type_params)


def _type_refs(node: Any):
    """Every type reference written inside a node (a field, a parser's or control's body)."""
    for child in ast.children(node):
        if isinstance(child, ast.TypeRef):
            yield child
        yield from _type_refs(child)


def self_references(program: ast.Program) -> None:
    """p4c's ResolveReferences (before any type check): a type named inside its own declaration
    (a struct, header or header_union's field; a parser's or control's body)."""
    for decl in program.decls:
        if isinstance(decl, ast.HeaderDecl):
            _distinct_type_params(decl)
            kind = decl.kind
        elif isinstance(decl, (ast.ParserDecl, ast.ControlDecl)):
            kind = "parser" if isinstance(decl, ast.ParserDecl) else "control"
        else:
            continue
        ref = next((r for r in _type_refs(decl) if r.kind == "named" and r.name == decl.name), None)
        if ref is not None:
            raise P4Error(ref.loc, f"Self-referencing types not supported: '{decl.name}' within '{kind} {decl.name}'")


def _distinct_type_params(decl: ast.HeaderDecl) -> None:
    """``struct S<T, T>``: the second ``T`` duplicates the first."""
    twice = next((p for i, p in enumerate(decl.type_params) if p in decl.type_params[:i]), None)
    if twice is not None:
        angle = find_after(decl.loc, "<")
        raise P4Error(find_after(angle, rf"\b{re.escape(twice)}\b", 1), f"{twice}: Duplicates declaration {twice}")


def template_field(t: Type) -> bool:
    """A field type that p4c's validators accept in a generic declaration as it is written: a
    type variable, or a specialization still naming one (``S<T>``); checked once specialized."""
    return isinstance(t, TypeVar) or isinstance(t, HeaderT) and is_generic(t.decl) and has_type_var(t)


def has_type_var(t: Type, seen: frozenset = frozenset()) -> bool:
    """Whether a type still names a type variable (a field of a generic declaration's template)."""
    if isinstance(t, TypeVar):
        return True
    if isinstance(t, StackT):
        return has_type_var(t.elem, seen)
    if isinstance(t, TupleT):
        return any(has_type_var(e, seen) for e in t.elems)
    if isinstance(t, HeaderT) and id(t) not in seen:
        return any(has_type_var(f, seen | {id(t)}) for f in t.fields.values())
    return False


def contains_self(t: Type, decl: ast.HeaderDecl) -> bool:
    """p4c's ContainsType: a type argument that is (or holds) a specialization of the generic
    declaration it specializes (``h<h<bit>>``), which p4c cannot expand."""
    if isinstance(t, StackT):
        return contains_self(t.elem, decl)
    if isinstance(t, TupleT):
        return any(contains_self(e, decl) for e in t.elems)
    if isinstance(t, HeaderT):
        return t.decl is decl or any(contains_self(f, decl) for f in t.fields.values())
    return False


def check_type_arg(base: ast.HeaderDecl, ref: ast.TypeRef, arg: ast.TypeRef, named: Any) -> None:
    """A type argument that is itself generic but unspecialized, or names a parser, control or
    package (p4c's TypeInference on Type_Specialized and its canonicalization)."""
    if named is base:  # ``S<S>``: the unspecialized declaration is itself
        raise P4Error(ref.loc, f"{base.name}: contains self '{base.kind} {base.name}' as type argument")
    if is_generic(named) and not arg.args:
        raise P4Error(arg.loc, f"{arg.name}: generic type needs type arguments")
    if isinstance(named, (ast.ParserDecl, ast.ControlDecl, ast.BlockTypeDecl)):
        kind = named.kind if isinstance(named, ast.BlockTypeDecl) else \
            ("parser" if isinstance(named, ast.ParserDecl) else "control")
        raise P4Error(ref.loc, f"{ast.type_text(ref)}: Cannot use {kind} {named.name} as a type parameter")


def specialized_name(decl: ast.HeaderDecl, args: list[Type]) -> str:
    return f"{decl.name}<{', '.join(map(str, args))}>"


def check_return_type(proto: ast.FunctionProto, types: dict[str, Any]) -> None:
    """p4c's TypeInference on a method (an extern function's prototype): a generic struct or
    header named as the return type without type arguments."""
    ref = proto.return_type
    if ref.kind == "named" and not ref.args and ref.name not in proto.type_params and is_generic(types.get(ref.name)):
        raise P4Error(ref.loc, f"{ref.name}: no type parameters supplied for return generic type")


def prototype_specializations(decl: ast.Decl, types: dict[str, Any]) -> list[tuple[list[str], ast.TypeRef]]:
    """The specializations of generic structs and headers an extern's, extern function's or
    parser/control/package type's prototypes name (``E(list<S<bit<8>>> d)``), each with the type
    parameters in scope: p4c's type checker checks them though nothing calls the prototype."""
    if isinstance(decl, ast.ExternDecl):
        protos = [(decl.type_params + m.type_params, m) for m in decl.ctors + decl.methods + decl.abstracts]
    elif isinstance(decl, ast.ExternFunction):
        protos = [(decl.proto.type_params, decl.proto)]
    elif isinstance(decl, ast.BlockTypeDecl):
        protos = [(decl.type_params, decl.params)]
    else:
        return []
    return [(tparams, ref) for tparams, node in protos for ref in _type_refs(node)
            if ref.kind == "named" and ref.args and is_generic(types.get(ref.name))]
