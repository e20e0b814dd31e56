"""Parse preprocessed P4 text with lark and build the AST of ``ast``.

Only syntax lives here; meaning (names, types, the supported subset) is the checker's.
"""

from __future__ import annotations

import copy
import re
import threading
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from . import ast
from .errors import Location, P4Error
from .preprocess import Source

_GRAMMAR = Path(__file__).with_name("p4.lark").read_text()

# Declarations that introduce a type name, so the lexer can tell types from values.
_TYPE_DECL = re.compile(
    r"\b(?:header|header_union|struct|extern|control|parser|package"
    # a serializable enum's underlying type: bit<W>, int<W> or a typedef's name (`enum mac_t E {`)
    r"|enum(?:\s+(?:bit|int)\s*<[^<>{};]*>|\s+[A-Za-z_]\w*(?=\s+[A-Za-z_]\w*\s*\{))?)"
    r"\s+([A-Za-z_]\w*)"
)
# `type` is also a legal field or parameter name (`hdr.icmp.type = X;`): a declaration has
# a type right after the keyword, never `=`, `.` before it or `=` inside.
_TYPEDEF = re.compile(r"(?<!\.)\b(?:typedef|type)\s+(?=[A-Za-z_])[^;{}=]*?\b([A-Za-z_]\w*)\s*;")
# `typedef header h { ... } T;` (p4c's derivedTypeDeclarationAsType) names T after the braces
_DERIVED_TYPEDEF = re.compile(
    r"\btypedef\s+(?:header|header_union|struct|enum)\b[^{};]*\{[^{}]*\}\s*([A-Za-z_]\w*)\s*;")
_TYPE_PARAMS = re.compile(r"\b[A-Za-z_]\w*\s*<\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*>")
_NOT_TYPES = {"bit", "int", "varbit", "bool", "error", "void", "string", "tuple", "match_kind"}
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _type_names(text: str) -> set[str]:
    text = _COMMENTS.sub(" ", text)
    names = set(_TYPE_DECL.findall(text)) | set(_TYPEDEF.findall(text)) | set(_DERIVED_TYPEDEF.findall(text))
    for group in _TYPE_PARAMS.findall(text):
        names.update(n.strip() for n in group.split(","))
    return names - _NOT_TYPES


class _Lexing(threading.local):
    type_names: set[str] = set()
    text: str = ""


_lexing = _Lexing()
_BASE_TYPES = {"bit", "int", "varbit", "bool", "tuple", "error", "string", "void", "match_kind", "list", "_"}
_WORD = re.compile(r"\s*([A-Za-z_]\w*)")


class _Retype:
    """Token kinds that depend on the program, decided on the token stream: names of
    declared types, and a '<' after a value's name that opens a call's type arguments."""

    always_accept = ()

    def process(self, stream):
        prev = None
        for tok in stream:
            if tok.type == "IDENT" and (tok.value in _lexing.type_names and not _value_at(tok) or _list_type_at(tok)):
                tok.type = "TYPE_IDENT"
            elif tok.type == "LESSTHAN" and prev is not None and prev.type == "IDENT" and _type_args_at(tok):
                tok.type = "_GENERIC_LT"
            prev = tok
            yield tok


def _value_at(tok: Token) -> bool:
    """A type's name before ``]`` is read as a value's (p4c's lexer knows a type name only in its
    scope: ``@a[x = 4 < H]`` before ``control c<H>``); the type checker then refuses the type."""
    return _lexing.text[tok.end_pos:].lstrip().startswith("]")


def _list_type_at(tok: Token) -> bool:
    """``list<T>`` (P4-16 1.2.4) is a type; ``list`` elsewhere is an ordinary name, as in p4c."""
    return tok.value == "list" and _lexing.text[tok.end_pos:].lstrip().startswith("<")


def _type_args_at(tok: Token) -> bool:
    """A type follows the '<', and a matching '>' is followed by '('."""
    text, start = _lexing.text, tok.start_pos
    m = _WORD.match(text, start + 1)
    if m is None or not (m.group(1) in _BASE_TYPES or m.group(1) in _lexing.type_names):
        return False
    depth, i = 1, start + 1
    while i < len(text) and depth:
        c = text[i]
        if c in ";{}=":
            return False
        depth += (c == "<") - (c == ">")
        i += 1
    return depth == 0 and text[i:].lstrip().startswith("(")


_parser = Lark(
    _GRAMMAR,
    parser="lalr",
    lexer="basic",
    propagate_positions=True,
    maybe_placeholders=True,
    postlex=_Retype(),
    cache=True,  # the LALR tables in the temporary folder: 4.4 s of every process's start (workers, ina-ctl) is 0.2 s
)

_TOKEN_WORDS = {
    "SEMICOLON": "';'", "LBRACE": "'{'", "RBRACE": "'}'", "LPAR": "'('", "RPAR": "')'",
    "IDENT": "an identifier", "TYPE_IDENT": "a type name", "INTEGER": "an integer",
    "COLON": "':'", "COMMA": "','", "EQUAL": "'='", "$END": "end of file",
}


def parse(source: Source) -> ast.Program:
    _lexing.type_names = _type_names(source.text)
    _lexing.text = source.text
    try:
        tree = _parser.parse(source.text)
        return _Builder(source).transform(tree)
    except UnexpectedInput as exc:
        raise _syntax_error(source, exc) from None
    except VisitError as exc:  # errors raised inside the builder arrive wrapped
        if isinstance(exc.orig_exc, P4Error):
            raise exc.orig_exc from None
        raise


def _syntax_error(source: Source, exc: UnexpectedInput) -> P4Error:
    loc = source.locate(getattr(exc, "line", 0) or 0, getattr(exc, "column", 0) or 0)
    if isinstance(exc, UnexpectedToken):
        if exc.token.type == "$END":
            return P4Error(loc, "syntax error: unexpected end of file")
        expected = sorted(_TOKEN_WORDS.get(t, repr(t)) for t in exc.expected)
        hint = f" (expected {', '.join(expected[:6])}{', ...' if len(expected) > 6 else ''})"
        return P4Error(loc, f"syntax error: unexpected '{exc.token.value}'{hint}")
    if isinstance(exc, UnexpectedCharacters):
        return P4Error(loc, f"syntax error: unexpected character {exc.char!r}")
    if isinstance(exc, UnexpectedEOF):
        return P4Error(loc, "syntax error: unexpected end of file")
    return P4Error(loc, "syntax error")


def parse_int_literal(text: str) -> tuple[int, int | None, bool]:
    """P4 integer literal -> (value, width or None, signed)."""
    m = re.fullmatch(r"(?:(\d+)([ws]))?(-?)(.*)", text)
    assert m is not None
    width = int(m.group(1)) if m.group(1) else None
    signed = m.group(2) == "s"
    body = m.group(4).replace("_", "")
    base = {"x": 16, "b": 2, "o": 8, "d": 10}.get(body[1:2].lower(), 10) if body[:1] == "0" else 10
    digits = body[2:] if base != 10 or body[1:2].lower() == "d" else body
    value = int(digits, base) if base != 10 else _decimal(digits)
    return (-value if m.group(3) else value), width, signed


def _decimal(digits: str) -> int:
    """A decimal literal of any length (p4c's are unbounded; Python's int() stops at 4300 digits)."""
    value = 0
    for i in range(0, len(digits), 4000):
        chunk = digits[i:i + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


def _unsupported(loc: Location, what: str) -> P4Error:
    """A construct p4c's grammar accepts that the built-in target does not implement, refused where it is."""
    return P4Error(loc, f"{what} is not supported by the built-in target")


def _split_annotations(children: list) -> list:
    """Fold the leading ``annotation*`` children into one list, so rules index stably."""
    n = 0
    while n < len(children) and isinstance(children[n], ast.Annotation):
        n += 1
    _unique_structured(children[:n])
    return [list(children[:n]), *children[n:]]


def _unique_structured(annotations: list) -> None:
    """p4c: a structured annotation's name appears once among an element's annotations."""
    seen: dict[str, ast.Annotation] = {}
    for a in annotations:
        earlier = seen.setdefault(a.name, a)
        if earlier is not a and (a.structured or earlier.structured):
            raise P4Error(a.loc, f"@{a.name}: duplicate name for structured annotation")


def _type_params_as_values(annotations: list, tparams: list) -> None:
    """p4c resolves a declaration's structured annotations in its scope, where its type parameter
    is a type: its type checker refuses it as a value there (exprs.py refuses other types)."""
    todo = [x for a in annotations if a.structured for x in a.args]
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.PathExpr) and node.name in tparams:
            raise P4Error(node.loc, f"{node.name}: Type cannot be used here, expecting an expression.")
        todo += ast.children(node)


def _names(items: list) -> list[str]:
    return [i for i in items if isinstance(i, str)]


def _compound(loc: Location, lhs: ast.Expr, op: str, rhs: ast.Expr) -> ast.Assign:
    """``lhs op= rhs`` as ``lhs = lhs op rhs`` (the read gets its own copy of the lvalue,
    since the checker annotates nodes in place), marked compound: p4c evaluates the lvalue once."""
    return ast.Assign(loc, lhs, ast.Binary(loc, op, copy.deepcopy(lhs), rhs), compound=True)


@v_args(meta=True)
class _Builder(Transformer):
    """lark tree -> ast nodes.  Method names are the grammar's rule and alias names."""

    def __init__(self, source: Source) -> None:
        super().__init__()
        self.source = source
        # statement-level instantiations: (start, end, node), refused by the body around them
        self._pending_instantiations: list[tuple[int, int, ast.Instantiation]] = []

    def _loc(self, meta) -> Location:
        if getattr(meta, "empty", True):
            return Location("<unknown>", 0, 0)
        return self.source.locate(meta.line, meta.column)

    def _name_loc(self, meta, keyword: str, name: str) -> Location:
        """Where the name after ``keyword`` sits in a declaration (p4c points its errors there)."""
        text = self.source.text
        m = re.compile(rf"\b{keyword}\s+({re.escape(name)})\b").search(text, getattr(meta, "start_pos", 0))
        if m is None:
            return self._loc(meta)
        pos = m.start(1)
        line = text.count("\n", 0, pos) + 1
        return self.source.locate(line, pos - text.rfind("\n", 0, pos))

    def _tok_loc(self, tok: Token) -> Location:
        return self.source.locate(tok.line, tok.column)

    # ---- names, annotations
    def name(self, meta, c):
        return str(c[0])  # plain str: names are compared and hashed, never located

    def apply_name(self, meta, c):
        return "apply"

    def key_name(self, meta, c):
        return "key"

    def actions_name(self, meta, c):
        return "actions"

    def entries_name(self, meta, c):
        return "entries"

    def state_name(self, meta, c):
        return "state"

    def type_name_kw(self, meta, c):
        return "type"

    def priority_name(self, meta, c):
        return "priority"

    def annotation(self, meta, c):
        return ast.Annotation(self._loc(meta), c[0], c[1] or [])

    def structured_annotation(self, meta, c):
        """``@name[...]``: an expression list or a key=value list (the grammar never mixes them)."""
        loc, args = self._loc(meta), c[1] if len(c) > 1 else []
        for arg in args:  # p4c's rule for the values: compile-time int, string or bool, never a list
            value = arg.arg if isinstance(arg, ast.NamedArg) else arg
            if isinstance(value, ast.ListExpr):
                items = ", ".join(ast.text(i) for i in value.items)
                raise P4Error(loc, f"{{ {items} }}: illegal type for structured annotation; "
                                   "must be int, string or bool")
        return ast.Annotation(loc, c[0], args, structured=True)

    def structured_exprs(self, meta, c):
        return [*c[0], c[1]] if len(c) == 2 else list(c)  # left-recursive: (items, item) or (item,)

    structured_kvs = structured_exprs

    def structured_kv(self, meta, c):
        return ast.NamedArg(self._loc(meta), c[0], c[1])

    def annotation_args(self, meta, c):
        return [*c[0], c[1]] if len(c) == 2 else list(c)  # left-recursive: (args, arg) or (arg,)

    def string_lit(self, meta, c):
        return ast.StringLit(self._loc(meta), bytes(str(c[0])[1:-1], "utf-8").decode("unicode_escape"))

    def kv_arg(self, meta, c):
        return ast.NamedArg(self._loc(meta), c[0], c[1])

    # ---- types
    def _tref(self, meta, kind, **kw):
        return ast.TypeRef(self._loc(meta), kind, **kw)

    def type_ref(self, meta, c):
        return c[0]

    def bool_type(self, meta, c):
        return self._tref(meta, "bool")

    def error_type(self, meta, c):
        return self._tref(meta, "error")

    def string_type(self, meta, c):
        return self._tref(meta, "string")

    def void_type(self, meta, c):
        return self._tref(meta, "void")

    def match_kind_type(self, meta, c):
        return self._tref(meta, "match_kind")

    def bit1_type(self, meta, c):
        return self._tref(meta, "bit", width=ast.IntLit(self._loc(meta), 1, None, False))

    def bit_type(self, meta, c):
        return self._tref(meta, "bit", width=c[0])

    def int_type(self, meta, c):
        return self._tref(meta, "int", width=c[0])

    def infint_type(self, meta, c):
        return self._tref(meta, "infint")

    def varbit_type(self, meta, c):
        return self._tref(meta, "varbit", width=c[0])

    def width_lit(self, meta, c):
        return self.int_lit(meta, c)

    def named_type(self, meta, c):
        return self._tref(meta, "named", name=str(c[0]))

    def specialized_type(self, meta, c):
        if str(c[0]) == "list":
            return self._tref(meta, "list", args=c[1])
        return self._tref(meta, "named", name=str(c[0]), args=c[1])

    def stack_type(self, meta, c):
        return self._tref(meta, "stack", args=[c[0]], width=c[1])

    def tuple_type(self, meta, c):
        return self._tref(meta, "tuple", args=c[0] or [])

    def dontcare_type(self, meta, c):
        return self._tref(meta, "dontcare")  # a type argument p4c infers (decls.resolve_type)

    def type_args(self, meta, c):
        return list(c)

    def type_params(self, meta, c):
        return [str(t) for t in c if t.type == "TYPE_IDENT"]

    # ---- top-level declarations
    def const_decl(self, meta, c):
        c = _split_annotations(c)
        return ast.ConstDecl(self._loc(meta), c[0], c[2], c[1], c[3])

    def typedef_decl(self, meta, c):
        c = _split_annotations(c)
        return ast.Typedef(self._loc(meta), c[0], c[2], c[1])

    def derived_typedef(self, meta, c):
        """p4c's derivedTypeDeclarationAsType: ``typedef header h {...} T;`` declares ``h``, then ``T`` as ``h``."""
        c = _split_annotations(c)
        inner = c[1]
        return [inner, ast.Typedef(self._loc(meta), c[0], c[2], ast.TypeRef(inner.loc, "named", name=inner.name))]

    def newtype_decl(self, meta, c):
        c = _split_annotations(c)
        return ast.Typedef(self._loc(meta), c[0], c[2], c[1], newtype=True)

    def field(self, meta, c):
        c = _split_annotations(c)
        return ast.Field(self._loc(meta), c[0], c[2], c[1])

    def header_decl(self, meta, c):
        return self._aggregate(meta, _split_annotations(c), "header")

    def header_union_decl(self, meta, c):
        return self._aggregate(meta, _split_annotations(c), "header_union")

    def struct_decl(self, meta, c):
        return self._aggregate(meta, _split_annotations(c), "struct")

    def _aggregate(self, meta, c: list, kind: str) -> ast.HeaderDecl:
        """A header, header_union or struct; a generic one (``struct S<T>``) keeps its type parameters."""
        anns, name, tparams = c[:3]
        return ast.HeaderDecl(self._loc(meta), anns, name, list(c[3:]), kind, list(tparams or []))

    def enum_decl(self, meta, c):
        c = _split_annotations(c)
        return ast.EnumDecl(self._loc(meta), c[0], c[1], _names(c[2:]))

    def serializable_enum_decl(self, meta, c):
        c = _split_annotations(c)
        members = [m for m in c[3:] if m is not None]
        return ast.EnumDecl(self._loc(meta), c[0], c[2], [m[0] for m in members], c[1],
                            [m[1] for m in members])

    def enum_member(self, meta, c):
        return (c[0], c[1])

    def error_decl(self, meta, c):
        return ast.ErrorDecl(self._loc(meta), [], "error", _names(c))

    def match_kind_decl(self, meta, c):
        return ast.MatchKindDecl(self._loc(meta), [], "match_kind", _names(c))

    def function_proto(self, meta, c):
        ret = c[0] if isinstance(c[0], ast.TypeRef) else ast.TypeRef(self._tok_loc(c[0]), "named", name=str(c[0]))
        return ast.FunctionProto(self._loc(meta), [], c[1], ret, c[2] or [], c[3])

    def extern_decl(self, meta, c):
        c = _split_annotations(c)
        loc = self._loc(meta)
        params = []
        for t in c[2] or []:
            if t.kind != "named" or t.args:
                raise P4Error(t.loc, "extern type parameters must be plain names")
            params.append(t.name)
        ctors = [m[1] for m in c[3:] if m[0] == "ctor"]
        methods = [m[1] for m in c[3:] if m[0] == "method"]
        abstracts = [m[1] for m in c[3:] if m[0] == "abstract"]
        for m in methods + abstracts:  # p4c's ValidateParsedProgram: a method named as its extern
            if m.name == str(c[1]):
                raise P4Error(m.loc, f"{m.name}: invalid constructor; cannot have a return type")
        return ast.ExternDecl(loc, c[0], str(c[1]), params, ctors, methods, abstracts)

    def extern_ctor(self, meta, c):
        c = _split_annotations(c)
        proto = ast.FunctionProto(self._loc(meta), c[0], c[1], ast.TypeRef(self._loc(meta), "void"), [], c[2])
        return ("ctor", proto)

    def extern_method(self, meta, c):
        c = _split_annotations(c)
        c[1].annotations = c[0]
        return ("method", c[1])

    def extern_abstract(self, meta, c):
        """An abstract method (TNA's ``RegisterAction.apply``): each instance implements it."""
        c = _split_annotations(c)
        c[1].annotations = c[0]
        return ("abstract", c[1])

    def extern_function_decl(self, meta, c):
        c = _split_annotations(c)
        c[1].annotations = c[0]
        return ast.ExternFunction(self._loc(meta), c[0], c[1].name, c[1])

    def function_decl(self, meta, c):
        c = _split_annotations(c)
        self._refuse_instantiations(meta, "a function or method")
        c[1].annotations = c[0]
        return ast.FunctionDecl(self._loc(meta), c[0], c[1].name, c[1], c[2])

    def parser_type_decl(self, meta, c):
        c = _split_annotations(c)
        return ast.BlockTypeDecl(self._loc(meta), c[0], c[1], "parser", c[2] or [], c[3])

    def control_type_decl(self, meta, c):
        c = _split_annotations(c)
        return ast.BlockTypeDecl(self._loc(meta), c[0], c[1], "control", c[2] or [], c[3])

    def package_decl(self, meta, c):
        c = _split_annotations(c)
        return ast.BlockTypeDecl(self._loc(meta), c[0], c[1], "package", c[2] or [], c[3])

    def params(self, meta, c):
        return [p for p in c if p is not None]

    def param(self, meta, c):
        c = _split_annotations(c)
        return ast.Param(self._loc(meta), c[0], c[3], str(c[1] or ""), c[2], c[4])

    def direction(self, meta, c):
        return str(c[0])

    def instantiation(self, meta, c):
        c = _split_annotations(c)
        return ast.Instantiation(self._loc(meta), c[0], c[3], c[1], c[2], c[4] if len(c) > 4 else None)

    def obj_initializer(self, meta, c):
        """The abstract methods' bodies; an instantiation among them (p4c parses one) waits for the
        function around it to refuse it, or for ``start`` when there is none."""
        for decl in c:
            if isinstance(decl, ast.Instantiation):
                self._pending_instantiations.append((meta.start_pos, meta.end_pos, decl))
        return list(c)

    def value_set_decl(self, meta, c):
        c = _split_annotations(c)
        return ast.ValueSetDecl(self._loc(meta), c[0], c[3], c[1], c[2])

    def empty_decl(self, meta, c):
        return None

    def start(self, meta, c):
        if self._pending_instantiations:
            inst = min((i for _, _, i in self._pending_instantiations), key=lambda i: (i.loc.line, i.loc.col))
            raise _unsupported(inst.loc, f"the instantiation {inst.name} inside an object initializer")
        decls = [d for x in c for d in (x if isinstance(x, list) else [x])]  # a derived typedef is two
        return ast.Program(self._loc(meta), [d for d in decls if d is not None])

    # ---- parsers
    def ctor_params(self, meta, c):
        return c[0]

    def parser_decl(self, meta, c):
        c = _split_annotations(c)
        anns, name, tparams, params, ctor = c[:5]
        loc = self._loc(meta)
        rest = c[5:]
        states = [x for x in rest if isinstance(x, ast.ParserState)]
        local = [x for x in rest if not isinstance(x, ast.ParserState)]
        decl = ast.ParserDecl(loc, anns, name, params, local, states, ctor or [])
        decl.type_params = tparams or []  # checked with type variables (blocks.py), then refused by the target
        return decl

    def parser_state(self, meta, c):
        c = _split_annotations(c)
        loc = self._loc(meta)
        self._refuse_instantiations(meta, "a parser state")
        transition = c[-1] if c[-1] is not None else ast.Transition(loc, "reject")  # p4c: no transition = reject
        return ast.ParserState(loc, c[0], c[1], list(c[2:-1]), transition)

    def transition_direct(self, meta, c):
        return ast.Transition(self._loc(meta), c[0])

    def transition_select(self, meta, c):
        exprs, cases = c[0]
        return ast.Transition(self._loc(meta), None, exprs, cases)

    def select_expr(self, meta, c):
        return (c[0], list(c[1:]))

    def select_case(self, meta, c):
        return ast.SelectCase(self._loc(meta), c[0], c[1])

    def keyset(self, meta, c):
        return [c[0]]

    def keyset_paren_mask(self, meta, c):
        return [ast.Mask(self._loc(meta), c[0], c[1])]

    def keyset_paren_range(self, meta, c):
        return [ast.Range(self._loc(meta), c[0], c[1])]

    def keyset_tuple(self, meta, c):
        return list(c)

    def keyset_default_paren(self, meta, c):
        return [ast.Default(self._loc(meta))]

    def ks_mask(self, meta, c):
        return ast.Mask(self._loc(meta), c[0], c[1])

    def ks_range(self, meta, c):
        return ast.Range(self._loc(meta), c[0], c[1])

    def ks_default(self, meta, c):
        return ast.Default(self._loc(meta))

    def ks_dontcare(self, meta, c):
        return ast.Default(self._loc(meta))

    # ---- controls
    def control_decl(self, meta, c):
        c = _split_annotations(c)
        anns, name, tparams, params, ctor = c[:5]
        loc = self._loc(meta)
        _type_params_as_values(anns, tparams or [])
        self._refuse_instantiations(meta, "a control 'apply' block")
        decl = ast.ControlDecl(loc, anns, name, params, list(c[5:-1]), c[-1], ctor or [])
        decl.type_params = tparams or []  # checked with type variables (blocks.py), then refused by the target
        return decl

    def action_decl(self, meta, c):
        c = _split_annotations(c)
        self._refuse_instantiations(meta, "a function or method")
        return ast.ActionDecl(self._loc(meta), c[0], c[1], c[2], c[3])

    def table_decl(self, meta, c):
        c = _split_annotations(c)
        table = ast.TableDecl(self._loc(meta), c[0], c[1])
        for kind, _, loc in c[2:]:
            written = "default_action" if kind == "default" else kind
            if written in table.property_locs:  # p4c refuses a second one, at it (before a missing 'actions')
                raise P4Error(loc, f"{written}: Duplicates declaration {written}")
            table.property_locs[written] = loc
        if not any(kind == "actions" for kind, _, _ in c[2:]):  # p4c's ValidateParsedProgram, at the name
            raise P4Error(self._name_loc(meta, "table", c[1]), f"{c[1]}: expected 'actions' property")
        for kind, value, _ in c[2:]:
            if kind == "key":
                table.keys = value
            elif kind == "actions":
                table.actions = value
            elif kind == "default":
                table.default_action, table.default_is_const = value
            elif kind == "entries":
                table.entries, table.entries_const = value
            else:
                value, annotations = value
                table.properties[kind] = value
                if annotations:
                    table.property_annotations[kind] = annotations
        return table

    def _property_loc(self, meta, keyword: str) -> Location:
        """Where a table property's name is written (after its annotations and ``const``)."""
        m = re.compile(rf"\b{keyword}\b").search(self.source.text, getattr(meta, "start_pos", 0))
        return self._loc(meta) if m is None else self._pos_loc(m.start())

    def _pos_loc(self, pos: int) -> Location:
        text = self.source.text
        return self.source.locate(text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos))

    def table_key(self, meta, c):
        return ("key", list(c), self._property_loc(meta, "key"))

    def table_actions(self, meta, c):
        c = _split_annotations(c)
        return ("actions", list(c[1:]), self._property_loc(meta, "actions"))

    def table_default(self, meta, c):
        c = _split_annotations(c)
        return ("default", (c[2], c[1] is not None), self._property_loc(meta, "default_action"))

    def table_entries(self, meta, c):
        c = _split_annotations(c)
        return ("entries", (list(c[2:]), c[1] is not None), self._property_loc(meta, "entries"))

    def table_custom(self, meta, c):
        c = _split_annotations(c)
        return (str(c[2]), (c[3], c[0]), self._property_loc(meta, str(c[2])))

    def key_element(self, meta, c):
        return ast.KeyElement(self._loc(meta), c[0], c[1], list(c[2:]))

    def action_ref(self, meta, c):
        c = _split_annotations(c)
        return ast.ActionRef(self._loc(meta), c[0], c[1], c[2])

    def invoked_action(self, meta, c):
        return ast.ActionRef(self._loc(meta), [], c[0], c[1], invoked=True)

    def top_action_ref(self, meta, c):
        c = _split_annotations(c)
        return ast.ActionRef(self._loc(meta), c[0], c[1], c[2], top_level=True)

    def entry(self, meta, c):
        c = _split_annotations(c)  # annotations may also follow the action (the spec's place)
        return ast.Entry(self._loc(meta), c[0] + c[4:], c[2], c[3], None, self._const_at(c[1]))

    def entry_with_priority(self, meta, c):
        c = _split_annotations(c)
        return ast.Entry(self._loc(meta), c[0] + c[5:], c[3], c[4], c[2], self._const_at(c[1]))

    def _const_at(self, const: Token | None) -> Location | None:
        """A `const` on one entry: the frontend takes it (tables.py), the built-in target does not."""
        return None if const is None else self._tok_loc(const)

    # ---- statements
    def block(self, meta, c):
        return ast.Block(self._loc(meta), [s for s in c if s is not None])

    def var_decl(self, meta, c):
        c = _split_annotations(c)
        return ast.VarDecl(self._loc(meta), c[0], c[2], c[1], c[3])

    def assignment(self, meta, c):
        return ast.Assign(self._loc(meta), c[0], c[1])

    def call_statement(self, meta, c):
        call = ast.Call(self._loc(meta), c[0], c[1] or [], c[2])
        return ast.CallStmt(self._loc(meta), call)

    def type_call_statement(self, meta, c):
        """``MyControl.apply(...);``: a direct type invocation (the checker makes the instance)."""
        loc = self._loc(meta)
        func = ast.TypeMember(self._tok_loc(c[0]), str(c[0]), c[1])
        return ast.CallStmt(loc, ast.Call(loc, func, [], c[2]))

    def type_call_args(self, meta, c):
        return c[0]

    def instantiation_statement(self, meta, c):
        """p4c parses an instantiation among statements; the enclosing body refuses it (ValidateParsedProgram)."""
        inst = self.instantiation(meta, c)
        self._pending_instantiations.append((meta.start_pos, meta.end_pos, inst))
        return inst

    def _refuse_instantiations(self, meta, where: str) -> None:
        """The first instantiation among the statements inside ``meta``'s span, with p4c's message."""
        inside = sorted((s, i.loc.line, i.loc.col, i) for s, e, i in self._pending_instantiations
                        if meta.start_pos <= s and e <= meta.end_pos)
        if inside:
            inst = inside[0][3]
            if where == "a parser state":
                raise P4Error(inst.loc, f"{inst.name}: syntax error: an instantiation is not a parser statement")
            raise P4Error(inst.loc, f"{inst.name}: invalid declaration. Instantiations cannot be in {where}.")

    def if_statement(self, meta, c):
        return ast.If(self._loc(meta), c[0], c[1], c[2])

    # `a op= b` is `a = a op b`; a call in `a`'s index runs once (frontend/ordering.py).
    def compound_assignment(self, meta, c):
        return _compound(self._loc(meta), c[0], str(c[1])[:-1], c[2])

    def shr_assignment(self, meta, c):
        return _compound(self._loc(meta), c[0], ">>", c[-1])

    for_compound, for_shr_assign = compound_assignment, shr_assignment
    for_assign = assignment

    def for_var(self, meta, c):
        return ast.VarDecl(self._loc(meta), [], c[1], c[0], c[2])

    def for_call(self, meta, c):
        return self.call_statement(meta, c)

    def for_steps(self, meta, c):
        return [s for s in c if s is not None]

    def for_cond(self, meta, c):
        return c[0]

    def for_statement(self, meta, c):
        return ast.For(self._loc(meta), c[0], c[1], c[2], c[3])

    def for_in_statement(self, meta, c):
        var = ast.VarDecl(self._loc(meta), [], c[1], c[0], None)
        return ast.ForIn(self._loc(meta), var, c[2], None, c[3])

    def for_range_statement(self, meta, c):
        var = ast.VarDecl(self._loc(meta), [], c[1], c[0], None)
        return ast.ForIn(self._loc(meta), var, c[2], c[3], c[4])

    def break_statement(self, meta, c):
        return ast.Break(self._loc(meta))

    def continue_statement(self, meta, c):
        return ast.Continue(self._loc(meta))

    def switch_statement(self, meta, c):
        return ast.Switch(self._loc(meta), c[0], list(c[1:]))

    def switch_case_block(self, meta, c):
        return ast.SwitchCase(self._loc(meta), [c[0]], c[1])

    def switch_case_fall(self, meta, c):
        return ast.SwitchCase(self._loc(meta), [c[0]], None)

    def default_label(self, meta, c):
        return "default"

    def exit_statement(self, meta, c):
        return ast.Exit(self._loc(meta))

    def return_statement(self, meta, c):
        return ast.Return(self._loc(meta), c[0])

    def empty_statement(self, meta, c):
        return ast.Empty(self._loc(meta))

    def lv_name(self, meta, c):
        return ast.PathExpr(self._tok_loc(c[0]), str(c[0]))

    def lv_top_name(self, meta, c):
        return ast.PathExpr(self._loc(meta), str(c[0]), top_level=True)

    def plus_slice(self, meta, c):
        """``x[lo +: w]``: a slice whose upper bound the checker computes (exprs.py)."""
        base, lo, width = (x for x in c if not isinstance(x, Token))
        return ast.Slice(self._loc(meta), base, None, lo, width)

    def lv_member(self, meta, c):
        return ast.Member(self._loc(meta), c[0], c[1])

    def lv_index(self, meta, c):
        return ast.Index(self._loc(meta), c[0], c[1])

    def lv_slice(self, meta, c):
        return ast.Slice(self._loc(meta), c[0], c[1], c[2])

    # ---- expressions
    def args(self, meta, c):
        return [a for a in c if a is not None]

    def expr_list(self, meta, c):
        return [a for a in c if a is not None]

    def dontcare_arg(self, meta, c):
        return ast.Default(self._loc(meta))

    def named_arg(self, meta, c):
        return ast.NamedArg(self._loc(meta), c[0], c[1])

    def int_lit(self, meta, c):
        value, width, signed = parse_int_literal(str(c[0]))
        return ast.IntLit(self._tok_loc(c[0]), value, width, signed)

    def true_lit(self, meta, c):
        return ast.BoolLit(self._loc(meta), True)

    def false_lit(self, meta, c):
        return ast.BoolLit(self._loc(meta), False)

    def nontype_keyword(self, meta, c):
        return c[0]

    def path(self, meta, c):
        return ast.PathExpr(self._tok_loc(c[0]), str(c[0]))

    def top_path(self, meta, c):
        return ast.PathExpr(self._loc(meta), str(c[0]), top_level=True)

    def type_member(self, meta, c):
        return ast.TypeMember(self._loc(meta), str(c[0]), c[1])

    def error_member(self, meta, c):
        return ast.TypeMember(self._loc(meta), "error", c[0])

    def ctor_call(self, meta, c):
        loc = self._loc(meta)
        return ast.CtorCall(loc, ast.TypeRef(loc, "named", name=str(c[0])), c[1])

    def generic_ctor_call(self, meta, c):
        loc = self._loc(meta)
        return ast.CtorCall(loc, ast.TypeRef(loc, "named", name=str(c[0]), args=c[1]), c[-1])

    def struct_expr(self, meta, c):
        pairs = c[0]
        return ast.StructExpr(self._loc(meta), [v for _, v in pairs], [n for n, _ in pairs], dots=c[1] is not None)

    def kv_list(self, meta, c):
        return [*c[0], c[1]] if len(c) == 2 else [c[0]]

    def kv_pair(self, meta, c):
        return (str(c[0]), c[1])

    def dots(self, meta, c):
        return ast.Dots(self._tok_loc(c[0]))

    def invalid_expr(self, meta, c):
        return ast.InvalidHeader(self._tok_loc(c[0]))

    def list_expr(self, meta, c):
        return ast.ListExpr(self._loc(meta), c[0])

    def member(self, meta, c):
        return ast.Member(self._loc(meta), c[0], c[1])

    def index(self, meta, c):
        return ast.Index(self._loc(meta), c[0], c[1])

    def slice(self, meta, c):
        return ast.Slice(self._loc(meta), c[0], c[1], c[2])

    def call(self, meta, c):
        return ast.Call(self._loc(meta), c[0], [], c[1])

    def generic_call(self, meta, c):
        return ast.Call(self._loc(meta), c[0], c[1], c[-1])

    def cast(self, meta, c):
        return ast.Cast(self._loc(meta), c[0], c[1])

    def cond(self, meta, c):
        return ast.Cond(self._loc(meta), c[0], c[1], c[2])

    def _unary(op):  # noqa: N805 - builds methods
        def build(self, meta, c):
            return ast.Unary(self._loc(meta), op, c[0])
        return build

    lnot, bnot, neg, pos = _unary("!"), _unary("~"), _unary("-"), _unary("+")

    def _binary(op):  # noqa: N805 - builds methods
        def build(self, meta, c):
            return ast.Binary(self._loc(meta), op, c[0], c[-1])
        return build

    lor, land = _binary("||"), _binary("&&")
    eq, ne, lt, gt, le, ge = _binary("=="), _binary("!="), _binary("<"), _binary(">"), _binary("<="), _binary(">=")
    bor, bxor, band, shl = _binary("|"), _binary("^"), _binary("&"), _binary("<<")
    add, sub, sat_add, sat_sub = _binary("+"), _binary("-"), _binary("|+|"), _binary("|-|")
    concat, mul, div, mod = _binary("++"), _binary("*"), _binary("/"), _binary("%")

    shr = _binary(">>")  # SHR_FIRST only lexes when the next char is ">"
