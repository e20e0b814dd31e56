"""The typed AST of the P4 subset: declared once here, built by ``syntax``, annotated by ``checker``.

Every node has a source ``loc``.  The checker fills the annotation slots (``type`` on
expressions, ``decl`` on names, ``value`` on compile-time constants); backends read only
checked trees, so this module is the backend-neutral IR.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .errors import Location


@dataclass(eq=False, slots=True)
class Node:
    loc: Location


@dataclass(eq=False, slots=True)
class Annotation(Node):
    name: str
    args: list[Any]  # Expr or str
    structured: bool = False  # `@name[...]` (p4c: its name is unique among the element's annotations)


def find_annotation(annotations: list[Annotation], name: str) -> Annotation | None:
    return next((a for a in annotations if a.name == name), None)


# ------------------------------------------------------------------ type references
@dataclass(eq=False, slots=True)
class TypeRef(Node):
    """A type as written: ``kind`` is bool/error/string/void/match_kind/bit/int/infint/
    varbit/named/stack/tuple/list/dontcare (``_`` as a type argument)."""

    kind: str
    name: str = ""
    width: Expr | None = None
    args: list[TypeRef] = field(default_factory=list)


# ------------------------------------------------------------------ expressions
@dataclass(eq=False, slots=True)
class Expr(Node):
    type: Any = field(default=None, init=False)   # set by the checker
    value: Any = field(default=None, init=False)  # compile-time value, when known


@dataclass(eq=False, slots=True)
class IntLit(Expr):
    number: int
    width: int | None
    signed: bool


@dataclass(eq=False, slots=True)
class BoolLit(Expr):
    truth: bool


@dataclass(eq=False, slots=True)
class StringLit(Expr):
    text: str


@dataclass(eq=False, slots=True)
class PathExpr(Expr):
    name: str
    top_level: bool = False
    decl: Any = field(default=None, init=False)


@dataclass(eq=False, slots=True)
class TypeMember(Expr):
    """``MyEnum.member`` or ``error.member``."""

    type_name: str
    member: str


@dataclass(eq=False, slots=True)
class Member(Expr):
    base: Expr
    member: str


@dataclass(eq=False, slots=True)
class Index(Expr):
    base: Expr
    index: Expr


@dataclass(eq=False, slots=True)
class Slice(Expr):
    base: Expr
    hi: Expr | None  # None until checked for an indexed slice
    lo: Expr
    width: Expr | None = None  # an indexed slice ``base[lo +: width]`` (the checker sets ``hi``)
    # A nested slice ``x[7:4][1:0]`` is checked into ``x[5:4]``; this keeps it as written
    # (P4Runtime key names).
    written: Slice | None = field(default=None, init=False)


@dataclass(eq=False, slots=True)
class Call(Expr):
    func: Expr
    type_args: list[TypeRef]
    args: list[Expr]
    target: Any = field(default=None, init=False)  # what the call resolves to (checker)


@dataclass(eq=False, slots=True)
class CtorCall(Expr):
    type_ref: TypeRef
    args: list[Expr]


@dataclass(eq=False, slots=True)
class ListExpr(Expr):
    items: list[Expr]


@dataclass(eq=False, slots=True)
class StructExpr(ListExpr):
    """``{ f = e, ... }``: ``names[i]`` is the field ``items[i]`` initialises; ``dots``, a trailing
    ``...`` (the other fields take their default values).  The checker puts the items in the
    struct's field order, so a backend reads it as a ListExpr initialising that struct."""

    names: list[str] = field(default_factory=list)
    dots: bool = False
    written: list[tuple[str, Expr]] | None = field(default=None, init=False)  # before the reordering, for messages


@dataclass(eq=False, slots=True)
class Dots(Expr):
    """``...``: the default value of the type the context gives it (P4-16 1.2.4)."""


@dataclass(eq=False, slots=True)
class InvalidHeader(Expr):
    """``{#}``: an invalid header of the header type the context gives it."""


@dataclass(eq=False, slots=True)
class Unary(Expr):
    op: str  # ! ~ - +
    operand: Expr


@dataclass(eq=False, slots=True)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(eq=False, slots=True)
class Cond(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(eq=False, slots=True)
class Cast(Expr):
    type_ref: TypeRef
    operand: Expr


@dataclass(eq=False, slots=True)
class Mask(Expr):
    """Keyset ``value &&& mask``."""

    base: Expr
    mask: Expr


@dataclass(eq=False, slots=True)
class Range(Expr):
    """Keyset ``lo .. hi``."""

    lo: Expr
    hi: Expr


@dataclass(eq=False, slots=True)
class Default(Expr):
    """Keyset ``default`` or ``_``."""


@dataclass(eq=False, slots=True)
class NamedArg(Expr):
    name: str
    arg: Expr


# ------------------------------------------------------------------ statements
@dataclass(eq=False, slots=True)
class Stmt(Node):
    pass


@dataclass(eq=False, slots=True)
class Assign(Stmt):
    """``lhs = rhs``; ``compound``: written ``lhs op= rhs``, kept as ``lhs = lhs' op rhs`` where
    ``lhs'`` is a copy of ``lhs`` (frontend/ordering.py evaluates its index once)."""

    lhs: Expr
    rhs: Expr
    compound: bool = False


@dataclass(eq=False, slots=True)
class CallStmt(Stmt):
    call: Call


@dataclass(eq=False, slots=True)
class If(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None


@dataclass(eq=False, slots=True)
class SwitchCase(Node):
    labels: list[str]  # action names, or "default"
    body: Block | None  # None: falls through to the next case


@dataclass(eq=False, slots=True)
class Switch(Stmt):
    subject: Expr
    cases: list[SwitchCase]


@dataclass(eq=False, slots=True)
class Block(Stmt):
    stmts: list[Stmt]


@dataclass(eq=False, slots=True)
class Exit(Stmt):
    pass


@dataclass(eq=False, slots=True)
class Return(Stmt):
    value: Expr | None


@dataclass(eq=False, slots=True)
class Empty(Stmt):
    pass


@dataclass(eq=False, slots=True)
class For(Stmt):
    """``for (init; cond; update) body``; ``cond`` None loops until ``break``."""

    init: list[Stmt]
    cond: Expr | None
    update: list[Stmt]
    body: Stmt


@dataclass(eq=False, slots=True)
class ForIn(Stmt):
    """``for (T x in lo .. hi)`` (``hi`` set) or ``for (T x in collection)``."""

    var: VarDecl
    collection: Expr  # the list, or the range's lower bound
    hi: Expr | None
    body: Stmt


@dataclass(eq=False, slots=True)
class Break(Stmt):
    pass


@dataclass(eq=False, slots=True)
class Continue(Stmt):
    pass


# ------------------------------------------------------------------ declarations
@dataclass(eq=False, slots=True)
class Decl(Stmt):
    annotations: list[Annotation]
    name: str


@dataclass(eq=False, slots=True)
class VarDecl(Decl):
    type_ref: TypeRef
    init: Expr | None
    type: Any = field(default=None, init=False)


@dataclass(eq=False, slots=True)
class ConstDecl(Decl):
    type_ref: TypeRef
    init: Expr
    type: Any = field(default=None, init=False)
    # a constructor parameter bound to an instance's argument (instances.py): p4c's frontend
    # sees a parameter there until its SpecializeAll, so its first ConstantFolding does not fold it
    ctor_param: bool = field(default=False, init=False)


@dataclass(eq=False, slots=True)
class Typedef(Decl):
    type_ref: TypeRef
    newtype: bool = False


@dataclass(eq=False, slots=True)
class Field(Decl):
    type_ref: TypeRef


@dataclass(eq=False, slots=True)
class HeaderDecl(Decl):
    fields: list[Field]
    kind: str = "header"  # header | struct | header_union
    type_params: list[str] = field(default_factory=list)  # a generic declaration's (``struct S<T>``)


@dataclass(eq=False, slots=True)
class EnumDecl(Decl):
    members: list[str]
    underlying: TypeRef | None = None
    values: list[Expr] | None = None


@dataclass(eq=False, slots=True)
class ErrorDecl(Decl):
    members: list[str]


@dataclass(eq=False, slots=True)
class MatchKindDecl(Decl):
    members: list[str]


@dataclass(eq=False, slots=True)
class Param(Decl):
    direction: str  # "" for directionless (action data, constructor arguments)
    type_ref: TypeRef
    default: Expr | None
    type: Any = field(default=None, init=False)


@dataclass(eq=False, slots=True)
class FunctionProto(Decl):
    return_type: TypeRef
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False, slots=True)
class ExternDecl(Decl):
    type_params: list[str]
    ctors: list[FunctionProto]
    methods: list[FunctionProto]
    abstracts: list[FunctionProto] = field(default_factory=list)  # implemented by each instance


@dataclass(eq=False, slots=True)
class ExternFunction(Decl):
    proto: FunctionProto


@dataclass(eq=False, slots=True)
class BlockTypeDecl(Decl):
    """A parser type, control type or package declaration (no body)."""

    kind: str  # parser | control | package
    type_params: list[str]
    params: list[Param]


@dataclass(eq=False, slots=True)
class Instantiation(Decl):
    type_ref: TypeRef
    args: list[Expr]
    type: Any = field(default=None, init=False)
    initializer: list[FunctionDecl] | None = None  # TNA: abstract methods implemented at the instance


@dataclass(eq=False, slots=True)
class ValueSetDecl(Decl):
    """``value_set<T>(size) name;`` in a parser: a select keyset the control plane fills."""

    type_ref: TypeRef
    size: Expr
    type: Any = field(default=None, init=False)  # the element type T


@dataclass(eq=False, slots=True)
class SelectCase(Node):
    keyset: list[Expr]  # one entry per select expression (tuple keysets flattened)
    state: str


@dataclass(eq=False, slots=True)
class Transition(Node):
    state: str | None  # direct transition
    select: list[Expr] | None = None
    cases: list[SelectCase] | None = None


@dataclass(eq=False, slots=True)
class ParserState(Decl):
    stmts: list[Stmt]
    transition: Transition


@dataclass(eq=False, slots=True)
class ParserDecl(Decl):
    params: list[Param]
    locals: list[Decl]
    states: list[ParserState]
    ctor_params: list[Param] = field(default_factory=list)  # `parser P(...)(bit<8> k)`
    # A copy specialised for its constructor arguments: parameter name -> the instance passed
    # (frontend/instances.py; a dict, so tree walks do not go into the instance's declaration)
    instance_args: dict[str, Instantiation] = field(default_factory=dict)
    type_params: list[str] = field(default_factory=list)  # `parser P<H>(...)`: checked with type variables


@dataclass(eq=False, slots=True)
class ActionDecl(Decl):
    params: list[Param]
    body: Block


@dataclass(eq=False, slots=True)
class KeyElement(Node):
    expr: Expr
    match_kind: str
    annotations: list[Annotation]


@dataclass(eq=False, slots=True)
class ActionRef(Node):
    annotations: list[Annotation]
    name: str
    args: list[Expr] | None
    decl: Any = field(default=None, init=False)
    top_level: bool = False  # `.a()`: the top-level action a, not a local one
    invoked: bool = False  # `a()()`: the result of the action call called (p4c's type error)


@dataclass(eq=False, slots=True)
class Entry(Node):
    annotations: list[Annotation]
    keyset: list[Expr]
    action: ActionRef
    priority: Expr | None
    const_at: Location | None = None  # where a `const` marks this one entry (P4Runtime's is_const)


@dataclass(eq=False, slots=True)
class TableDecl(Decl):
    keys: list[KeyElement] = field(default_factory=list)
    actions: list[ActionRef] = field(default_factory=list)
    default_action: ActionRef | None = None
    default_is_const: bool = False
    entries: list[Entry] | None = None
    entries_const: bool = True  # `const entries` (else initial entries the control plane may change)
    properties: dict[str, Expr] = field(default_factory=dict)  # size, counters, ...
    # Annotations written on a property, e.g. `@name("ap") implementation = action_profile(...)`:
    # p4c names an action profile constructed in place after them.
    property_annotations: dict[str, list[Annotation]] = field(default_factory=dict)
    property_locs: dict[str, Location] = field(default_factory=dict)  # property name as written -> where


@dataclass(eq=False, slots=True)
class FunctionDecl(Decl):
    proto: FunctionProto
    body: Block
    type: Any = field(default=None, init=False)  # the return type (checker)


@dataclass(eq=False, slots=True)
class ControlDecl(Decl):
    params: list[Param]
    locals: list[Decl]
    body: Block
    ctor_params: list[Param] = field(default_factory=list)  # `control C(...)(bit<8> k)`
    instance_args: dict[str, Instantiation] = field(default_factory=dict)  # as ParserDecl's
    type_params: list[str] = field(default_factory=list)  # as ParserDecl's


@dataclass(eq=False, slots=True)
class Program(Node):
    decls: list[Decl]


# ------------------------------------------------------------------ printing
def text(e: Any) -> str:
    """An expression printed the way p4c prints one in its messages (``hdr.i.a / hdr.i.b``),
    so a refusal names the construct as the program wrote it."""
    if isinstance(e, IntLit):
        if e.width is None:
            return str(e.number)
        return f"{'-' if e.number < 0 else ''}{e.width}{'s' if e.signed else 'w'}{abs(e.number)}"
    if isinstance(e, BoolLit):
        return "true" if e.truth else "false"
    if isinstance(e, StringLit):
        return f'"{e.text}"'
    if isinstance(e, PathExpr):
        return ("." if e.top_level else "") + e.name
    if isinstance(e, TypeMember):
        return f"{e.type_name}.{e.member}"
    if isinstance(e, Member):
        return f"{text(e.base)}.{e.member}"
    if isinstance(e, Index):
        return f"{text(e.base)}[{text(e.index)}]"
    if isinstance(e, Slice) and e.width is not None:
        return f"{text(e.base)}[{text(e.lo)} +: {text(e.width)}]"
    if isinstance(e, Slice):
        shown = e.written or e  # a nested slice, as written
        return f"{text(shown.base)}[{text(shown.hi)}:{text(shown.lo)}]"
    if isinstance(e, Call):
        return f"{text(e.func)}({', '.join(text(a) for a in e.args)})"
    if isinstance(e, StructExpr):
        pairs = e.written if e.written is not None else list(zip(e.names, e.items))
        return "{ " + ", ".join([*(f"{n} = {text(i)}" for n, i in pairs), *(["..."] if e.dots else [])]) + " }"
    if isinstance(e, ListExpr):
        return "{" + ", ".join(text(i) for i in e.items) + "}"
    if isinstance(e, Dots):
        return "..."
    if isinstance(e, InvalidHeader):
        return "{#}"
    if isinstance(e, Unary):
        return f"{e.op}{_operand(e.operand)}"
    if isinstance(e, Binary):
        return f"{_operand(e.left)} {e.op} {_operand(e.right)}"
    if isinstance(e, Cond):
        return f"{_operand(e.cond)} ? {_operand(e.then)} : {_operand(e.other)}"
    if isinstance(e, Cast):
        return f"({type_text(e.type_ref)}){_operand(e.operand)}"
    if isinstance(e, Mask):
        return f"{text(e.base)} &&& {text(e.mask)}"
    if isinstance(e, Range):
        return f"{text(e.lo)} .. {text(e.hi)}"
    if isinstance(e, Default):
        return "_"
    if isinstance(e, NamedArg):
        return f"{e.name} = {text(e.arg)}"
    return type(e).__name__


def _operand(e: Any) -> str:
    return f"({text(e)})" if isinstance(e, (Binary, Cond)) else text(e)


def type_text(ref: TypeRef) -> str:
    """A type reference as written (``bit<8>``, ``tuple<bit<8>, T>``, ``h_t[4]``)."""
    if ref.kind in ("bit", "int", "varbit"):
        return f"{ref.kind}<{text(ref.width)}>"
    if ref.kind == "stack":
        return f"{type_text(ref.args[0])}[{text(ref.width)}]"
    if ref.kind == "tuple":
        return "tuple<" + ", ".join(type_text(a) for a in ref.args) + ">"
    if ref.kind == "named":
        return ref.name + ("<" + ", ".join(type_text(a) for a in ref.args) + ">" if ref.args else "")
    if ref.kind == "dontcare":
        return "_"
    if ref.kind == "list":
        return "list<" + ", ".join(type_text(a) for a in ref.args) + ">"
    return ref.kind


_NOT_CHILDREN = ("loc", "type", "value", "decl", "target", "annotations", "written")
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}  # node class: the fields that may hold sub-nodes


def children(node: Any):
    """Sub-nodes of a node, checked or not, skipping the checker's annotations (a call's target,
    a declaration, a nested slice as written are not children); of a list, its nodes."""
    if isinstance(node, list):
        yield from (x for x in node if isinstance(x, Node))
        return
    if not isinstance(node, Node):
        return
    names = _CHILD_FIELDS.get(type(node))
    if names is None:
        names = _CHILD_FIELDS[type(node)] = tuple(f.name for f in fields(node) if f.name not in _NOT_CHILDREN)
    for name in names:
        v = getattr(node, name)
        if isinstance(v, Node):
            yield v
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, Node):
                    yield x
