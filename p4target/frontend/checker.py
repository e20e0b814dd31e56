"""Semantic pass: resolve names, type-check, fold constants, find the v1model pipeline.

The checker walks the AST once and annotates it in place (``Expr.type``, ``Expr.value``,
``PathExpr.decl``, ``Call.target``, declared types).  Anything outside the subset the
built-in target executes is rejected here, with its location, rather than ignored later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import ast
from .ast import text
from .calls import CallChecks
from .divisions import ARITH_OPS, DivisionChecks, used_closure
from .env import CheckEnv
from .errors import P4Error
from .instances import InstanceChecks
from .ordering import order_assignment
from .profiles import PROFILE_EXTERNS, ProfileChecks
from .program import CheckedProgram, Pipeline
from .scope import CallTarget, Scope
from .tna import TNA_EXTERNS, TNA_METHODS, TnaChecks, is_tna_main, present_params
from .types import (
    BOOL,
    DONTCARE,
    ERROR,
    INFINT,
    MATCH_KIND,
    STRING,
    VOID,
    ActionRunT,
    ApplyResultT,
    BitsT,
    BlockT,
    EnumT,
    ExternT,
    HeaderT,
    StackT,
    TableT,
    TupleT,
    Type,
    TypeVar,
    VarbitT,
    bit_width,
    fold_arith,
    is_bits_struct,
    is_numeric,
    wrap,
)

# Externs whose semantics the executor implements; any other extern is rejected.
SUPPORTED_EXTERNS = {"packet_in", "packet_out", "register", "counter", "direct_counter", "meter", "direct_meter",
                     *PROFILE_EXTERNS,
                     *TNA_EXTERNS}
# v1model extern functions with packet-path or control-plane effects (see executor/v1model_externs.py)
V1MODEL_FUNCTIONS = {
    "clone", "clone_preserving_field_list", "resubmit_preserving_field_list", "recirculate_preserving_field_list",
    "digest", "log_msg", "assert", "assume", "random", "verify_checksum_with_payload",
    "update_checksum_with_payload", "truncate",
}
SUPPORTED_FUNCTIONS = {
    "mark_to_drop", "hash", "verify_checksum", "update_checksum", "verify", "static_assert",
} | V1MODEL_FUNCTIONS
# The pre-2021 v1model forms with a field-list argument: still declared (deprecated) in
# v1model.p4, but p4c-bm2-ss has had no converter for them since p4c PR #2902 (it stops
# with "unknown extern function"), so there is no BMv2 behaviour to follow.
FIELD_LIST_FORMS = {"clone3": "clone_preserving_field_list", "resubmit": "resubmit_preserving_field_list",
                    "recirculate": "recirculate_preserving_field_list"}
SUPPORTED_METHODS = {
    "packet_in": {"extract", "advance", "length", "lookahead"},
    "packet_out": {"emit"},
    "register": {"read", "write"},
    "counter": {"count"},
    "direct_counter": {"count"},
    "meter": {"execute_meter"},
    "direct_meter": {"read"},
    **TNA_METHODS,
}
SUPPORTED_HASHES = {"crc16", "crc32", "csum16", "identity"}
TABLE_PROPERTIES = {"size", "counters", "meters", "support_timeout", "largest_priority_wins", "priority_delta",
                    "implementation"}
# Methods of a header instance (P4-16 v1.2.5 section 8.17); the size methods are constants.
HEADER_METHODS = ("isValid", "setValid", "setInvalid", "minSizeInBits", "minSizeInBytes", "maxSizeInBits",
                  "maxSizeInBytes")
_BMV2_PRIORITY_SPAN = 1 << 24  # larger than any @priority a program gives a const entry
PIPELINE_BLOCKS = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")


def _declared_type_name(e: ast.Expr) -> str | None:
    """The type name a variable or parameter was declared with (``T v``), if ``e`` names one."""
    decl = e.decl if isinstance(e, ast.PathExpr) else None
    ref = getattr(decl, "type_ref", None)
    return ref.name if isinstance(ref, ast.TypeRef) and ref.kind == "named" else None


class Checker(CallChecks, InstanceChecks, TnaChecks, ProfileChecks, DivisionChecks):
    def __init__(self, program: ast.Program) -> None:
        self.env = CheckEnv(program)

    # ================================================================ entry
    def check(self) -> CheckedProgram:
        mains = [d for d in self.env.program.decls if isinstance(d, ast.Instantiation) and d.name == "main"]
        if mains and mains[0].type_ref.name == "Switch":  # TNA (is_tna_main, once the type is resolved)
            self.env.arch = "tna"
        for decl in self.env.program.decls:
            self._top_level(decl)
        if not mains:
            raise P4Error(self.env.program.loc, "the program has no 'main' package instantiation")
        if is_tna_main(mains[0]):
            result = self.tna_program(mains[0])
        else:
            std = self.env.types.get("standard_metadata_t")
            if not isinstance(std, HeaderT):
                raise P4Error(self.env.program.loc, "standard_metadata_t is not declared (include <v1model.p4>)")
            pipeline = self._pipeline(mains[0])
            result = CheckedProgram(self.env.program, self.env.errors, std, pipeline, self.env.program.decls)
        used = used_closure(self.env.used)  # p4c removed an unused action, function or table before its midend
        midend = [(stage, err) for stage, err, owner in self.env.midend if owner is None or owner in used]
        if midend:
            raise min(midend, key=lambda pair: pair[0])[1]  # the earliest pass, then source order
        return result

    def defer(self, stage: int, err: P4Error) -> None:
        """A refusal p4c makes in its midend (stage 0: BMv2's CheckUnsupported, 1: its
        ConstantFolding and StrengthReduction after LocalCopyPropagation, 2: CompileTimeOperations)."""
        self.env.midend.append((stage, err, self.env.owner))

    # ================================================================ declarations
    def _top_level(self, decl: ast.Decl) -> None:
        if isinstance(decl, ast.ErrorDecl):
            for name in decl.members:
                if name in self.env.errors:
                    raise P4Error(decl.loc, f"error.{name} is declared twice")
                self.env.errors.append(name)
        elif isinstance(decl, ast.MatchKindDecl):
            self.env.match_kinds.update(decl.members)
        elif isinstance(decl, ast.Typedef):
            t = self.resolve_type(decl.type_ref)
            if decl.newtype and isinstance(t, BitsT):  # a `type` keeps its name for P4Runtime (p4info.py)
                t = BitsT(t.width, t.signed, decl)
            self._declare_type(decl, t)
        elif isinstance(decl, ast.HeaderDecl):
            self._header(decl)
        elif isinstance(decl, ast.EnumDecl):
            self._enum(decl)
        elif isinstance(decl, (ast.ExternDecl, ast.BlockTypeDecl)):
            self._declare_type(decl, decl)
        elif isinstance(decl, ast.ExternFunction):
            if isinstance(self.env.globals.values.get(decl.name), ast.ExternFunction):
                self.env.overloads.setdefault(decl.name, [self.env.globals.values[decl.name]]).append(decl)
            else:
                self.env.globals.declare(decl)
        elif isinstance(decl, (ast.ParserDecl, ast.ControlDecl)):
            self._declare_type(decl, decl)
            if not decl.ctor_params:  # else checked per instance, with its arguments (instances.py)
                self._block(decl)
        elif isinstance(decl, ast.ConstDecl):
            self._const_decl(decl, self.env.globals)
            self.env.globals.declare(decl)
        elif isinstance(decl, ast.ActionDecl):
            self.env.globals.declare(decl)
            self._action(decl, self.env.globals)
        elif isinstance(decl, ast.FunctionDecl):
            self._function(decl, self.env.globals)
        elif isinstance(decl, ast.Instantiation):
            self._instantiation(decl, self.env.globals)
            self.env.globals.declare(decl)
        else:
            raise P4Error(decl.loc, f"{type(decl).__name__} is not supported at top level")

    def _declare_type(self, decl: ast.Decl, t: Any) -> None:
        if decl.name in self.env.types:
            raise P4Error(decl.loc, f"type '{decl.name}' is already declared")
        self.env.types[decl.name] = t

    def _header(self, decl: ast.HeaderDecl) -> None:
        t = HeaderT(decl.name, decl.kind, decl=decl)
        self._declare_type(decl, t)
        for f in decl.fields:
            if f.name in t.fields:
                raise P4Error(f.loc, f"field '{f.name}' is declared twice in {decl.name}")
            ft = self.resolve_type(f.type_ref)
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
            if not isinstance(under, BitsT):
                raise P4Error(decl.loc, "a serializable enum needs a bit<W> or int<W> underlying type")
            t.underlying = under
            for name, expr in zip(decl.members, decl.values or []):
                self.expr(expr, self.env.globals)
                t.values[name] = wrap(self.const_int(expr), under)
        if len(set(t.members)) != len(t.members):
            raise P4Error(decl.loc, f"enum {decl.name} declares a member twice")
        self._declare_type(decl, t)

    def _const_decl(self, decl: ast.ConstDecl, scope: Scope) -> None:
        decl.type = self.resolve_type(decl.type_ref)
        self.expr(decl.init, scope)
        self.coerce(decl.init, decl.type, "constant initializer")
        if decl.init.value is None:
            raise P4Error(decl.init.loc, f"the initializer of constant '{decl.name}' is not a compile-time constant")

    def _instantiation(self, decl: ast.Instantiation, scope: Scope) -> None:
        t = self.resolve_type(decl.type_ref)
        decl.type = t
        if isinstance(t, BlockT) and isinstance(t.decl, ast.BlockTypeDecl) and t.decl.kind == "package":
            return  # the package's arguments are constructor calls: _pipeline checks them
        if isinstance(t, BlockT) and isinstance(t.decl, (ast.ControlDecl, ast.ParserDecl)):
            self.block_instantiation(decl, t, scope)  # its arguments are checked against the parameters' types
            return
        for a in decl.args:
            self.expr(a, scope)
        if isinstance(t, ExternT):
            name = t.decl.name
            if name not in SUPPORTED_EXTERNS:
                raise P4Error(decl.loc, f"extern '{name}' is not supported by the built-in target")
            ctor = next((c for c in t.decl.ctors if len(c.params) == len(decl.args)), None)
            if ctor is None:
                raise P4Error(decl.loc, f"no constructor of {name} takes {len(decl.args)} arguments")
            self._check_args(decl.loc, ctor.params, decl.args, dict(zip(t.decl.type_params, t.args)))
            for a in decl.args:
                if a.value is None and not isinstance(a.type, ExternT) and not _constant_list(a):
                    raise P4Error(a.loc, "constructor arguments must be compile-time constants")
            if decl.initializer or t.decl.abstracts or name in TNA_EXTERNS:
                self.extern_initializer(decl, t, scope)
        else:
            raise P4Error(decl.loc, f"cannot instantiate {t} here")

    # ================================================================ types
    def resolve_type(self, ref: ast.TypeRef) -> Type:
        k = ref.kind
        if k == "bool":
            return BOOL
        if k == "error":
            return ERROR
        if k == "string":
            return STRING
        if k == "void":
            return VOID
        if k == "match_kind":
            return MATCH_KIND
        if k == "infint":
            return INFINT
        if k in ("bit", "int"):
            self.expr(ref.width, self.env.globals)
            width = self.const_int(ref.width)
            if width <= 0:
                raise P4Error(ref.loc, f"{k}<{width}>: width must be positive")
            return BitsT(width, k == "int")
        if k == "varbit":
            self.expr(ref.width, self.env.globals)
            width = self.const_int(ref.width)
            if width <= 0:
                raise P4Error(ref.loc, f"varbit<{width}>: width must be positive")
            return VarbitT(width)
        if k == "tuple":
            return TupleT.of([self.resolve_type(a) for a in ref.args])
        if k == "stack":
            elem = self.resolve_type(ref.args[0])
            if not (isinstance(elem, HeaderT) and (elem.is_header or elem.is_union)):
                raise P4Error(ref.loc, "header stacks must contain headers or header unions")
            self.expr(ref.width, self.env.globals)
            size = self.const_int(ref.width)
            if size <= 0:
                raise P4Error(ref.loc, "a header stack needs a positive size")
            return StackT(elem, size)
        # named
        if ref.name in self.env.type_vars:
            return self.env.type_vars[ref.name]
        t = self.env.types.get(ref.name)
        if t is None:
            raise P4Error(ref.loc, f"unknown type '{ref.name}'")
        if isinstance(t, ast.ExternDecl):
            args = tuple(self.resolve_type(a) for a in ref.args)
            if len(args) != len(t.type_params):
                raise P4Error(ref.loc, f"{t.name} takes {len(t.type_params)} type arguments, got {len(args)}")
            return ExternT(t, args)
        package = isinstance(t, ast.BlockTypeDecl) and t.kind == "package"
        if ref.args and not (package and len(ref.args) == len(t.type_params)):
            raise P4Error(ref.loc, f"type '{ref.name}' takes no type arguments")
        if isinstance(t, (ast.ParserDecl, ast.ControlDecl, ast.BlockTypeDecl)):
            return BlockT(t)
        return t

    # ================================================================ parsers and controls
    def _params(self, params: list[ast.Param], scope: Scope) -> None:
        for p in params:
            p.type = self.resolve_type(p.type_ref)
            if p.default is not None and p.default.type is None:
                self.expr(p.default, self.env.globals)
                self.coerce(p.default, p.type, f"default value of '{p.name}'")
                if p.default.value is None:
                    raise P4Error(p.default.loc, "a default parameter value that is not a compile-time constant "
                                  "is not supported by the built-in target")
            scope.declare(p)

    def _block(self, decl: ast.ParserDecl | ast.ControlDecl, consts: list[ast.ConstDecl] | None = None,
               origin: Any = None, instances: dict[str, ast.Instantiation] | None = None) -> None:
        """``consts``: the constructor parameters, bound to an instance's arguments; ``instances``:
        those bound to an instance of the caller's, which the parameter's name then names."""
        scope = Scope(self.env.globals, decl)
        for c in consts or []:
            scope.declare(c)
        scope.values.update(instances or {})
        self._params(decl.params, scope)
        self.open_block(origin or decl)
        try:
            with self.fresh_values():  # a control's initialised locals are known in its apply block
                for local in decl.locals:  # (p4c's MoveInitializers puts them at its start)
                    self._local(local, scope)
                if isinstance(decl, ast.ParserDecl):
                    self._parser_states(decl, scope)
                else:
                    self.stmt(decl.body, Scope(scope, decl))
        finally:
            self.close_block()

    def _local(self, local: ast.Decl, scope: Scope) -> None:
        if isinstance(local, ast.VarDecl):
            self._var_decl(local, scope)
        elif isinstance(local, ast.ConstDecl):
            self._const_decl(local, scope)
            scope.declare(local)
        else:  # a table, an action, an instance's methods: bodies of their own
            with self.fresh_values(local if isinstance(local, ast.TableDecl) else None):
                self._other_local(local, scope)

    def _other_local(self, local: ast.Decl, scope: Scope) -> None:
        if isinstance(local, ast.Instantiation):
            self._instantiation(local, scope)
            scope.declare(local)
        elif isinstance(local, ast.ActionDecl):
            scope.declare(local)
            self._action(local, scope)
        elif isinstance(local, ast.TableDecl):
            scope.declare(local)
            self._table(local, scope)
        elif isinstance(local, ast.FunctionDecl):
            self._function(local, scope)
        elif isinstance(local, ast.ValueSetDecl) and isinstance(scope.owner, ast.ParserDecl):
            self._value_set(local, scope)
            scope.declare(local)
        else:
            raise P4Error(local.loc, f"{type(local).__name__} is not supported here")

    def _parser_states(self, decl: ast.ParserDecl, scope: Scope) -> None:
        names = {s.name: s for s in decl.states}
        if len(names) != len(decl.states):
            raise P4Error(decl.loc, f"parser {decl.name} declares a state twice")
        if "start" not in names:
            raise P4Error(decl.loc, f"parser {decl.name} has no 'start' state")
        for reserved in ("accept", "reject"):
            if reserved in names:
                raise P4Error(names[reserved].loc, f"state '{reserved}' is predefined")
        for state in decl.states:
            with self.fresh_values():  # p4c's LocalCopyPropagation: one state at a time
                self._parser_state(state, names, Scope(scope, decl))

    def _parser_state(self, state: ast.ParserState, names: dict[str, ast.ParserState], inner: Scope) -> None:
        state.stmts = [self.stmt(s, inner) for s in state.stmts]
        self.check_parser_apply_places(state)
        tr = state.transition
        targets = [tr.state] if tr.state else [c.state for c in tr.cases or []]
        for t in targets:
            if t not in names and t not in ("accept", "reject"):
                raise P4Error(tr.loc, f"transition to unknown state '{t}'")
        if tr.select is not None:
            self._select(tr, inner)

    def _select(self, tr: ast.Transition, scope: Scope) -> None:
        types = []
        for e in tr.select:
            t = self.expr(e, scope)
            if not (isinstance(t, BitsT) or t is BOOL or isinstance(t, EnumT) or t is ERROR):
                raise P4Error(e.loc, f"cannot select on a value of type {t}")
            types.append(t)
        for case in tr.cases:
            if len(case.keyset) == 1 and isinstance(case.keyset[0], ast.Default):
                continue
            if self._value_set_case(case, types, scope):
                continue
            if len(case.keyset) != len(types):
                raise P4Error(case.loc, f"keyset has {len(case.keyset)} elements, select has {len(types)}")
            for ks, t in zip(case.keyset, types):
                self.keyset_element(ks, t, scope)

    def keyset_element(self, ks: ast.Expr, t: Type, scope: Scope) -> None:
        """A select case or const entry element: value, mask, range or default."""
        parts = {ast.Mask: ("base", "mask"), ast.Range: ("lo", "hi")}.get(type(ks), ())
        if isinstance(ks, ast.Default):
            ks.type = t
            return
        for attr in parts or ("self",):
            e = ks if attr == "self" else getattr(ks, attr)
            self.expr(e, scope)
            if parts and isinstance(t, EnumT) and t.underlying is not None and e.type != t:
                self.coerce(e, t.underlying, "keyset")  # a mask or bound of a serializable enum key
            else:
                self.coerce(e, t, "keyset")
            if e.value is None:
                raise P4Error(e.loc, "keyset values must be compile-time constants")
        if parts and not (isinstance(t, BitsT) or (isinstance(t, EnumT) and t.underlying is not None)):
            raise P4Error(ks.loc, f"masks and ranges need a bit<W> value, not {t}")
        ks.type = t

    def _value_set(self, decl: ast.ValueSetDecl, scope: Scope) -> None:
        """P4Runtime's value set element types: bit<W>, a struct of bit<W>, a serializable enum."""
        t = decl.type = self.resolve_type(decl.type_ref)
        if isinstance(t, TupleT):  # P4Runtime names a value set's fields after a struct's
            raise P4Error(decl.type_ref.loc, f"value_set<{t}> is not supported by the built-in target: "
                          "use a struct of bit<W> fields")
        fields = list(t.fields.values()) if isinstance(t, HeaderT) and t.kind == "struct" else [t]
        for f in fields:
            if not (isinstance(f, BitsT) and not f.signed or isinstance(f, EnumT) and f.underlying is not None):
                raise P4Error(decl.type_ref.loc, f"value_set<{t}> is not supported by the built-in target: "
                              "use bit<W>, a struct of bit<W> fields or a serializable enum")
        self.expr(decl.size, scope)
        if self.const_int(decl.size) < 0:
            raise P4Error(decl.size.loc, "a value_set size cannot be negative")

    def _value_set_case(self, case: ast.SelectCase, types: list[Type], scope: Scope) -> bool:
        """A case whose keyset names a value_set: its fields must line up with the select keys."""
        names = [ks for ks in case.keyset if isinstance(ks, ast.PathExpr)
                 and isinstance(scope.lookup(ks.name), ast.ValueSetDecl) and not ks.top_level]
        if not names:
            return False
        if len(case.keyset) != 1:
            raise P4Error(names[0].loc, "a value_set inside a tuple keyset is not supported by the built-in target")
        ks = names[0]
        decl: ast.ValueSetDecl = scope.lookup(ks.name)
        t = decl.type
        fields = list(t.fields.values()) if isinstance(t, HeaderT) else [t]
        if fields != types:
            raise P4Error(ks.loc, f"value_set {ks.name} holds {t}, which does not match the select keys "
                          f"({', '.join(map(str, types))})")
        ks.decl, ks.type = decl, t
        return True

    def _action(self, decl: ast.ActionDecl, scope: Scope) -> None:
        inner = Scope(scope, decl)
        self._params(decl.params, inner)
        seen_data = False
        for p in decl.params:
            if p.direction == "":
                seen_data = True
            elif seen_data:
                raise P4Error(p.loc, "directional parameters must come before action data parameters")
            if p.direction == "" and not (isinstance(p.type, BitsT) or p.type is BOOL):
                raise P4Error(p.loc, f"action data parameter '{p.name}' must be bit<W>, int<W> or bool")
        with self.fresh_values(decl, decl.params):
            self.stmt(decl.body, inner)

    def _action_ref(self, ref: ast.ActionRef, scope: Scope, all_args: bool) -> None:
        decl = scope.lookup(ref.name)
        if not isinstance(decl, ast.ActionDecl):
            raise P4Error(ref.loc, f"'{ref.name}' is not an action")
        ref.decl = decl
        args = ref.args or []
        wanted = decl.params if all_args else [p for p in decl.params if p.direction]
        if ref.args is None and not all_args and wanted:
            raise P4Error(ref.loc, f"action {decl.name} needs arguments for its directional parameters")
        if ref.args is not None or all_args:
            if len(args) != len(wanted):
                raise P4Error(ref.loc, f"action {decl.name} expects {len(wanted)} arguments here, got {len(args)}")
            for a in args:
                self.expr(a, scope)
            self._check_args(ref.loc, wanted, args, {})
        if not all_args:  # the action list: its arguments bind the directional parameters
            self.bind_params(decl, decl.params, args, data=True)
            if all_args:
                for a, p in zip(args, wanted):
                    if p.direction == "" and a.value is None:
                        raise P4Error(a.loc, "action data here must be a compile-time constant")

    def _table(self, t: ast.TableDecl, scope: Scope) -> None:
        for key in t.keys:
            self.env.key_table = t
            try:
                kt = self.expr(key.expr, scope)
            finally:
                self.env.key_table = None
            if key.match_kind not in self.env.match_kinds:
                raise P4Error(key.loc, f"unknown match kind '{key.match_kind}'")
            if key.match_kind not in ("exact", "ternary", "lpm", "range", "optional", "selector"):
                raise P4Error(key.loc, f"match kind '{key.match_kind}' is not supported by the built-in target")
            # An error key: p4c-bm2-ss matches it as BMv2's 32-bit error code (exact; P4Info: bitwidth 0).
            if not (isinstance(kt, BitsT) or kt is BOOL or isinstance(kt, EnumT) or kt is ERROR):
                raise P4Error(key.expr.loc, f"a table key cannot have type {kt}")
            serializable = isinstance(kt, EnumT) and kt.underlying is not None
            if key.match_kind in ("lpm", "ternary", "range") and not (isinstance(kt, BitsT) or serializable):
                raise P4Error(key.expr.loc, f"{key.match_kind} keys must be bit<W>, not {kt}")
        if sum(k.match_kind == "lpm" for k in t.keys) > 1:
            raise P4Error(t.loc, "a table can have at most one lpm key")
        # `actions = {}` and no default_action: as p4c, NoAction is added below (@defaultonly) and is
        # the default, so the table only ever runs NoAction.  (No `actions` at all: refused by the parser.)
        names = []
        for ref in t.actions:
            self._action_ref(ref, scope, all_args=False)
            names.append(ref.decl)
        if t.default_action is None:
            noaction = scope.lookup("NoAction")
            if not isinstance(noaction, ast.ActionDecl):
                raise P4Error(t.loc, f"table {t.name} has no default_action and NoAction is not declared")
            t.default_action = ast.ActionRef(t.loc, [], "NoAction", [])
            if noaction not in names:
                implicit = ast.ActionRef(t.loc, [ast.Annotation(t.loc, "defaultonly", [])], "NoAction", None)
                t.actions.append(implicit)
                self._action_ref(implicit, scope, all_args=False)
                names.append(noaction)
        self._action_ref(t.default_action, scope, all_args=True)
        if t.default_action.decl not in names:
            raise P4Error(t.default_action.loc, "the default action must be in the table's actions list")
        for name, value in t.properties.items():
            if name not in TABLE_PROPERTIES:
                raise P4Error(value.loc, f"table property '{name}' is not supported by the built-in target")
            if name == "implementation":
                self.table_implementation(t, value, scope)
            else:
                self.expr(value, scope)
        if "size" in t.properties:
            if self.const_int(t.properties["size"]) <= 0:
                raise P4Error(t.properties["size"].loc, "table size must be positive")
        counters = t.properties.get("counters")
        if counters is not None:
            kind = counters.type.decl.name if isinstance(counters.type, ExternT) else None
            if kind not in ("direct_counter", "DirectCounter"):
                raise P4Error(counters.loc, "'counters' must name a direct_counter (TNA: DirectCounter) instance")
        meters = t.properties.get("meters")
        if meters is not None:
            if not (isinstance(meters.type, ExternT) and meters.type.decl.name == "direct_meter"):
                raise P4Error(meters.loc, "'meters' must name a direct_meter instance")
        self.check_profile_table(t)
        for entry in t.entries or []:
            self._entry(t, entry, scope, names)
        if t.entries:
            self._entry_priorities(t)

    def _entry_priorities(self, t: ast.TableDecl) -> None:
        """p4c's rules (P4-16 v1.2.4 "Entry priorities"): `const entries` take none (the
        first entry wins); initial `entries` with none get priority_delta steps from the
        last entry up; otherwise the first entry needs one and each later entry without
        one takes the previous priority minus priority_delta."""
        given = [e for e in t.entries if e.priority is not None]
        if t.entries_const:
            if given:
                raise P4Error(given[0].loc, "a table with 'const' entries cannot have priorities")
            self._priority_annotations(t)
            return
        wins = t.properties.get("largest_priority_wins")
        if wins is not None and (wins.type is not BOOL or wins.value is None):
            raise P4Error(wins.loc, "largest_priority_wins must be a constant bool")
        if wins is not None and not wins.value:
            raise P4Error(wins.loc, "largest_priority_wins = false is not supported by the built-in target")
        delta_e = t.properties.get("priority_delta")
        delta = 1 if delta_e is None else self.const_int(delta_e)
        if delta <= 0:
            raise P4Error(delta_e.loc, "priority_delta must be positive")
        if not given:
            for i, e in enumerate(t.entries):
                e.priority = ast.IntLit(e.loc, 1 + delta * (len(t.entries) - 1 - i), None, False)
                e.priority.value, e.priority.type = e.priority.number, INFINT
            return
        if all(k.match_kind in ("exact", "lpm") for k in t.keys):
            raise P4Error(given[0].loc, "the table's match kinds do not use priorities, but some are given")
        if t.entries[0].priority is None:
            raise P4Error(t.entries[0].loc, "the first entry must have a priority")
        current = 0
        for e in t.entries:
            if e.priority is None:
                e.priority = ast.IntLit(e.loc, current, None, False)
                e.priority.value, e.priority.type = current, INFINT
            current = e.priority.value
            if current <= 0:
                raise P4Error(e.loc, f"entry priority {current} is not positive")
            current -= delta

    def _priority_annotations(self, t: ast.TableDecl) -> None:
        """`@priority(N)` on const entries, as p4c's BMv2 backend passes them on: an entry's
        BMv2 priority is N, else its position (1 for the first), and BMv2 prefers the
        smallest; our tables prefer the largest, so the order is turned round."""
        notes = [ast.find_annotation(e.annotations, "priority") for e in t.entries]
        if not any(notes):
            return
        for i, (e, note) in enumerate(zip(t.entries, notes)):
            bmv2 = i + 1
            if note is not None:
                arg = note.args[0] if len(note.args) == 1 else None
                if not isinstance(arg, ast.IntLit) or arg.number < 0:
                    raise P4Error(note.loc, "@priority needs one non-negative integer")
                bmv2 = arg.number
            e.priority = ast.IntLit(e.loc, _BMV2_PRIORITY_SPAN - bmv2, None, False)
            e.priority.value, e.priority.type = e.priority.number, INFINT

    def _entry(self, t: ast.TableDecl, entry: ast.Entry, scope: Scope, actions: list) -> None:
        if len(entry.keyset) != len(t.keys):
            if not (len(entry.keyset) == 1 and isinstance(entry.keyset[0], ast.Default)):
                raise P4Error(entry.loc, f"entry has {len(entry.keyset)} key values, table has {len(t.keys)} keys")
            entry.keyset = [ast.Default(entry.loc) for _ in t.keys]
        for ks, key in zip(entry.keyset, t.keys):
            self.keyset_element(ks, key.expr.type, scope)
            if isinstance(ks, ast.Mask) and key.match_kind not in ("ternary", "lpm"):
                raise P4Error(ks.loc, f"a mask is not allowed on a {key.match_kind} key")
            if isinstance(ks, ast.Range) and key.match_kind != "range":
                raise P4Error(ks.loc, f"a range is not allowed on a {key.match_kind} key")
            if isinstance(ks, ast.Default) and key.match_kind == "exact":
                raise P4Error(ks.loc, "an exact key needs a value")
        self._action_ref(entry.action, scope, all_args=True)
        if entry.action.decl not in actions:
            raise P4Error(entry.action.loc, f"action {entry.action.name} is not in the table's actions list")
        if entry.priority is not None:
            self.expr(entry.priority, scope)
            if self.const_int(entry.priority) < 0:
                raise P4Error(entry.priority.loc, "an entry priority cannot be negative")

    # ================================================================ statements
    def _var_decl(self, decl: ast.VarDecl, scope: Scope) -> None:
        decl.type = self.resolve_type(decl.type_ref)
        if isinstance(decl.type, (ExternT, BlockT)) or decl.type in (VOID, STRING, MATCH_KIND):
            raise P4Error(decl.loc, f"cannot declare a variable of type {decl.type}")
        if decl.type is INFINT:
            raise P4Error(decl.loc, "a variable needs a fixed-width type (int is for constants)")
        if decl.init is not None:
            self.expr(decl.init, scope)
            self.coerce(decl.init, decl.type, "initializer")
        self.note_write(decl, decl.init)
        scope.declare(decl)

    def stmt(self, s: ast.Stmt, scope: Scope) -> ast.Stmt:
        """Check a statement; returns what the executor runs in its place (``s``, or for an
        assignment a block that orders its parts as p4c does: ordering.py)."""
        if isinstance(s, ast.Block):
            inner = Scope(scope, scope.owner)
            s.stmts = [self.stmt(x, inner) for x in s.stmts]
        elif isinstance(s, ast.Assign):
            lt = self.expr(s.lhs, scope)
            self.lvalue(s.lhs)
            self.expr(s.rhs, scope)
            self.coerce(s.rhs, lt, "assignment")
            self.note_write(s.lhs, s.rhs)
            return order_assignment(s)
        elif isinstance(s, ast.CallStmt):
            self.expr(s.call, scope)
        elif isinstance(s, ast.If):
            self.expr(s.cond, scope)
            self.coerce(s.cond, BOOL, "if condition")
            s.then, s.other = self._branches(scope, [s.then, s.other])
        elif isinstance(s, ast.Switch):
            self._switch(s, scope)
        elif isinstance(s, ast.VarDecl):
            self._var_decl(s, scope)
        elif isinstance(s, ast.ConstDecl):
            self._const_decl(s, scope)
            scope.declare(s)
        elif isinstance(s, ast.Exit):
            if isinstance(scope.owner, ast.ParserDecl):
                raise P4Error(s.loc, "exit is not allowed in a parser")
            if isinstance(scope.owner, ast.FunctionDecl):
                raise P4Error(s.loc, "exit is not allowed in a function")
        elif isinstance(s, ast.Return):
            if self._return(s, scope):
                pass
            elif s.value is not None:
                raise P4Error(s.loc, "return with a value is only allowed in functions")
            if isinstance(scope.owner, ast.ParserDecl):
                raise P4Error(s.loc, "return is not allowed in a parser")
        elif isinstance(s, ast.Empty):
            pass
        elif isinstance(s, (ast.For, ast.ForIn)):
            self._loop(s, scope)
        elif isinstance(s, (ast.Break, ast.Continue)):
            if not self.env.loops:
                raise P4Error(s.loc, f"'{type(s).__name__.lower()}' is only allowed inside a for loop")
        else:
            raise P4Error(s.loc, f"{type(s).__name__} is not supported here")
        return s

    def _branches(self, scope: Scope, bodies: list[ast.Stmt | None]) -> list[ast.Stmt | None]:
        """The arms of an if or a switch, each from what was known before it; after them, what
        none of them changed.  Returns the arms to run (``stmt``)."""
        before, after, arms = self.env.known, [], []
        for body in bodies:
            self.env.known = dict(before)
            arms.append(None if body is None else self.stmt(body, Scope(scope, scope.owner)))
            after.append(self.env.known)
        self.merge_values(before, after)
        return arms

    def _loop(self, s: ast.For | ast.ForIn, scope: Scope) -> None:
        self.forget_all()  # p4c drops what the loop writes; here, everything
        try:
            self._loop_body(s, scope)
        finally:
            self.forget_all()

    def _loop_body(self, s: ast.For | ast.ForIn, scope: Scope) -> None:
        if isinstance(scope.owner, ast.ParserDecl):
            raise P4Error(s.loc, "a for loop in a parser is not supported by the built-in target")
        inner = Scope(scope, scope.owner)
        for decl in s.init if isinstance(s, ast.For) else [s.var]:
            if isinstance(decl, ast.VarDecl):
                scope.declare_loop_variable(decl)
        if isinstance(s, ast.For):
            s.init = [self.stmt(x, inner) for x in s.init]
            if s.cond is not None:
                self.expr(s.cond, inner)
                self.coerce(s.cond, BOOL, "for condition")
        else:
            self._var_decl(s.var, inner)
            t = s.var.type
            if s.hi is None:
                ct = self.expr(s.collection, scope)
                if not isinstance(ct, StackT):  # p4c's frontend iterates over ranges, stacks and list<T> only
                    raise P4Error(s.collection.loc, "Typechecking does not support iteration over this "
                                  f"collection of type {ct}")
                if self.env.arch == "tna":
                    raise P4Error(s.collection.loc, "for-in over a header stack is not supported by the "
                                  "built-in target")
            elif not isinstance(t, BitsT):
                raise P4Error(s.var.loc, f"a range loop needs a bit<W> or int<W> variable, not {t}")
            if self.env.arch == "v1model":  # p4c-bm2-ss 1.2.5's CheckUnsupported: classic for loops only
                self.defer(0, P4Error(s.loc, "BMV2 does not support for-in loops"))
            for item in [s.collection, s.hi] if s.hi is not None else []:
                self.expr(item, scope)
                self.coerce(item, t, "for-in element")
        self.env.loops += 1
        try:
            if isinstance(s, ast.For):
                s.update = [self.stmt(x, inner) for x in s.update]
            s.body = self.stmt(s.body, Scope(inner, scope.owner))
        finally:
            self.env.loops -= 1

    def _switch(self, s: ast.Switch, scope: Scope) -> None:
        t = self.expr(s.subject, scope)
        if not isinstance(t, ActionRunT):
            return self._value_switch(s, t, scope)
        allowed = {ref.decl.name: ref.decl for ref in t.table.actions}
        seen: set[str] = set()
        before, after = self.env.known, []
        for case in s.cases:
            for i, label in enumerate(case.labels):
                if isinstance(label, ast.PathExpr):
                    label = case.labels[i] = label.name
                elif label != "default":
                    raise P4Error(label.loc, "a switch on action_run needs action names as labels")
                if label != "default" and label not in allowed:
                    raise P4Error(case.loc, f"'{label}' is not an action of table {t.table.name}")
                if label in seen:
                    raise P4Error(case.loc, f"switch label '{label}' appears twice")
                seen.add(label)
            if case.body is not None:
                self.env.known = dict(before)
                self.stmt(case.body, Scope(scope, scope.owner))
                after.append(self.env.known)
        if s.cases and s.cases[-1].body is None:
            raise P4Error(s.cases[-1].loc, "the last switch case needs a block")
        self.merge_values(before, after)

    def _value_switch(self, s: ast.Switch, t: Type, scope: Scope) -> None:
        """``switch (expr)`` with constant labels (P4-16 v1.2.2): bit<W>, int<W> and enums.  The spec
        allows error too, but p4c 1.2.5 refuses it, and a program p4c refuses is refused here."""
        if t is ERROR:
            raise P4Error(s.subject.loc, "'switch' type can't be error")
        if not isinstance(t, (BitsT, EnumT)):
            raise P4Error(s.subject.loc, f"cannot switch on a value of type {t}")
        seen: set[Any] = set()
        before, after = self.env.known, []
        for case in s.cases:
            for label in case.labels:
                if label == "default":
                    key: Any = "default"
                else:
                    self.expr(label, scope)
                    self.coerce(label, t, "switch label")
                    if label.value is None:
                        raise P4Error(label.loc, "switch labels must be compile-time constants")
                    key = label.value
                if key in seen:
                    raise P4Error(case.loc, "a switch label appears twice")
                seen.add(key)
            if case.body is not None:
                self.env.known = dict(before)
                case.body = self.stmt(case.body, Scope(scope, scope.owner))
                after.append(self.env.known)
        if s.cases and s.cases[-1].body is None:
            raise P4Error(s.cases[-1].loc, "the last switch case needs a block")
        self.merge_values(before, after)

    def lvalue(self, e: ast.Expr) -> None:
        """Raise unless ``e`` can be written."""
        if isinstance(e, ast.PathExpr):
            d = e.decl
            if isinstance(d, ast.VarDecl):
                return
            if isinstance(d, ast.Param) and d.direction in ("out", "inout"):
                return
            what = "an 'in' parameter" if isinstance(d, ast.Param) else "not a variable"
            raise P4Error(e.loc, f"cannot assign to '{e.name}': {what}")
        if isinstance(e, ast.Member) and isinstance(e.base.type, StackT) and e.member not in ("next", "last"):
            raise P4Error(e.loc, f"cannot assign to '.{e.member}' of a header stack")
        if isinstance(e, ast.Member) and isinstance(e.base.type, (HeaderT, StackT)):
            return self.lvalue(e.base)
        if isinstance(e, (ast.Index, ast.Slice)):
            return self.lvalue(e.base)
        raise P4Error(e.loc, "this expression cannot be assigned to")

    # ================================================================ expressions
    def const_int(self, e: ast.Expr) -> int:
        if not isinstance(e.value, int) or isinstance(e.value, bool):
            raise P4Error(e.loc, "expected a compile-time integer constant")
        return e.value

    def coerce(self, e: ast.Expr, t: Type, what: str) -> None:
        """Check that ``e`` may be used where ``t`` is expected; unsized ints take ``t``."""
        if e.type == t or t is DONTCARE:
            return
        if e.type is INFINT and isinstance(t, BitsT):
            e.type = t
            if e.value is not None:
                e.value = wrap(e.value, t)
            return
        if isinstance(t, TypeVar):
            return
        if isinstance(e, ast.ListExpr) and isinstance(t, HeaderT):
            # A struct/header initialiser `{a, b}`: one item per field, in order.
            if len(e.items) != len(t.fields):
                raise P4Error(e.loc, f"{what}: {t} has {len(t.fields)} fields, the list has {len(e.items)}")
            for item, field_type in zip(e.items, t.fields.values()):
                self.coerce(item, field_type, what)
            e.type = t
            return
        raise P4Error(e.loc, f"{what}: expected {t}, got {e.type}")

    def expr(self, e: ast.Expr, scope: Scope) -> Type:
        method = getattr(self, "_e_" + type(e).__name__, None)
        if method is None:
            raise P4Error(e.loc, f"{type(e).__name__} expressions are not supported here")
        e.type = method(e, scope)
        return e.type

    def _e_IntLit(self, e: ast.IntLit, scope: Scope) -> Type:
        if e.width is None:
            e.value = e.number
            return INFINT
        t = BitsT(e.width, e.signed)
        e.value = wrap(e.number, t)
        return t

    def _e_BoolLit(self, e: ast.BoolLit, scope: Scope) -> Type:
        e.value = e.truth
        return BOOL

    def _e_StringLit(self, e: ast.StringLit, scope: Scope) -> Type:
        e.value = e.text
        return STRING

    def _e_Default(self, e: ast.Default, scope: Scope) -> Type:
        return DONTCARE

    def _e_PathExpr(self, e: ast.PathExpr, scope: Scope) -> Type:
        d = (scope.root() if e.top_level else scope).lookup(e.name)
        if d is None:
            if e.name in self.env.types:
                raise P4Error(e.loc, f"'{e.name}' is a type, not a value")
            raise P4Error(e.loc, f"'{e.name}' is not declared")
        e.decl = d
        if isinstance(d, ast.ConstDecl):
            e.value = d.init.value
            return d.type
        if isinstance(d, (ast.Param, ast.VarDecl, ast.Instantiation)):
            return d.type
        if isinstance(d, ast.TableDecl):
            return TableT(d)
        if isinstance(d, (ast.ActionDecl, ast.ExternFunction, ast.FunctionDecl)):
            return VOID  # only meaningful as a call target; _e_Call checks
        raise P4Error(e.loc, f"'{e.name}' cannot be used as a value")

    def _e_TypeMember(self, e: ast.TypeMember, scope: Scope) -> Type:
        if e.type_name == "error":
            if e.member not in self.env.errors:
                raise P4Error(e.loc, f"error.{e.member} is not declared")
            e.value = self.env.errors.index(e.member)
            return ERROR
        t = self.env.types.get(e.type_name)
        if isinstance(t, EnumT):
            if e.member not in t.members:
                raise P4Error(e.loc, f"enum {t.name} has no member '{e.member}'")
            e.value = t.code(e.member)
            return t
        raise P4Error(e.loc, f"'{e.type_name}.{e.member}': {e.type_name} is not an enum")

    def _e_Member(self, e: ast.Member, scope: Scope) -> Type:
        bt = self.expr(e.base, scope)
        if isinstance(bt, TupleT):
            raise P4Error(e.loc, f"a tuple has no field '{e.member}': use a constant index, t[0]")
        if isinstance(bt, HeaderT):
            if e.member in bt.fields:
                return bt.fields[e.member]
            if bt.is_header and e.member in HEADER_METHODS:
                return VOID
            if bt.is_union and e.member == "isValid":
                return VOID
            raise P4Error(e.loc, f"{bt.kind} {bt.name} has no field '{e.member}'")
        if isinstance(bt, StackT):
            if e.member in ("push_front", "pop_front"):
                return VOID  # a method; _e_Call resolves it
            if e.member in ("next", "last", "lastIndex"):
                if not isinstance(scope.owner, ast.ParserDecl):
                    raise P4Error(e.loc, f"header stack '.{e.member}' can only be used in a parser")
                return BitsT(32) if e.member == "lastIndex" else bt.elem
            if e.member == "size":
                e.value = bt.size
                return BitsT(32)
            raise P4Error(e.loc, f"header stack has no member '{e.member}'")
        if isinstance(bt, ApplyResultT):
            if e.member in ("hit", "miss"):
                return BOOL
            if e.member == "action_run":
                return ActionRunT(bt.table)
            raise P4Error(e.loc, f"table apply result has no member '{e.member}'")
        if isinstance(bt, (TableT, BlockT, ExternT)):
            return VOID  # a method; _e_Call resolves it
        raise P4Error(e.loc, f"a value of type {bt} has no member '{e.member}'")

    def _e_Index(self, e: ast.Index, scope: Scope) -> Type:
        bt = self.expr(e.base, scope)
        if isinstance(bt, TupleT):  # p4c: "Tuple index ... must be constant", "larger than tuple size"
            self.expr(e.index, scope)
            if e.index.value is None:
                raise P4Error(e.index.loc, f"Tuple index {text(e.index)} must be constant")
            i = self.const_int(e.index)
            if not 0 <= i < len(bt.elems):
                raise P4Error(e.index.loc, f"Tuple index {i} larger than tuple size {len(bt.elems)}")
            return bt.elems[i]
        if not isinstance(bt, StackT):
            raise P4Error(e.loc, f"cannot index a value of type {bt}")
        it = self.expr(e.index, scope)
        if e.index.value is None:
            if not isinstance(it, BitsT):  # int<W> too: a negative index is out of range
                raise P4Error(e.index.loc, f"a header stack index must be bit<W> or int<W>, not {it}")
            return bt.elem  # a run-time index: the executor checks its bounds
        i = self.const_int(e.index)
        if not 0 <= i < bt.size:
            raise P4Error(e.index.loc, f"index {i} is out of bounds for {bt}")
        return bt.elem

    def _e_Slice(self, e: ast.Slice, scope: Scope) -> Type:
        bt = self.expr(e.base, scope)
        self.expr(e.hi, scope)
        self.expr(e.lo, scope)
        hi, lo = self.const_int(e.hi), self.const_int(e.lo)
        if not isinstance(bt, BitsT):
            raise P4Error(e.loc, f"cannot slice a value of type {bt}")
        if not (0 <= lo <= hi < bt.width):
            raise P4Error(e.loc, f"slice [{hi}:{lo}] is out of range for {bt}")
        if e.base.value is not None:
            e.value = (e.base.value >> lo) & ((1 << (hi - lo + 1)) - 1)
        elif isinstance(e.base, ast.Slice):
            _flatten_slice(e, hi, lo)
        return BitsT(hi - lo + 1)

    def _e_ListExpr(self, e: ast.ListExpr, scope: Scope) -> Type:
        """A list expression is a tuple of its items' types until ``coerce`` gives it the struct,
        header or tuple type it initialises."""
        return TupleT.of([self.expr(i, scope) for i in e.items])

    def _e_Cast(self, e: ast.Cast, scope: Scope) -> Type:
        t = self.resolve_type(e.type_ref)
        src = self.expr(e.operand, scope)
        var = _declared_type_name(e.operand)
        if var in self.env.generic_names:  # checked here once per binding, but p4c checks the generic body
            raise P4Error(e.loc, f"Cannot cast from '{var}' to '{t}'")
        ok = (
            src == t
            or (src is INFINT and (isinstance(t, BitsT) or t is BOOL))
            or (isinstance(src, BitsT) and isinstance(t, BitsT))
            or (src is BOOL and t == BitsT(1))
            or (src == BitsT(1) and t is BOOL)
            or (isinstance(t, EnumT) and t.underlying is not None and (src == t.underlying or src is INFINT))
            or (isinstance(src, EnumT) and src.underlying is not None and isinstance(t, BitsT))
        )
        if isinstance(src, BitsT) and isinstance(t, BitsT) and src.signed != t.signed and src.width != t.width:
            ok = False  # p4c: change width and signedness in two casts
        if not ok:
            raise P4Error(e.loc, f"cannot cast {src} to {t}")
        v = e.operand.value
        if v is not None:
            if t is BOOL:
                if src is INFINT and v not in (0, 1):
                    raise P4Error(e.loc, f"cannot cast {v} to bool")
                e.value = bool(v)
            elif isinstance(t, (BitsT, EnumT)):
                target = t if isinstance(t, BitsT) else t.underlying
                e.value = wrap(int(v), target)
        return t

    def _e_Unary(self, e: ast.Unary, scope: Scope) -> Type:
        t = self.expr(e.operand, scope)
        v = e.operand.value
        if e.op == "!":
            self.coerce(e.operand, BOOL, "operand of '!'")
            e.value = None if v is None else not v
            return BOOL
        if not is_numeric(t):
            raise P4Error(e.loc, f"operator '{e.op}' needs an integer, got {t}")
        if e.op == "~" and t is INFINT:
            raise P4Error(e.loc, "'~' needs a fixed-width operand")
        if v is not None:
            e.value = wrap({"~": lambda x: ~x, "-": lambda x: -x, "+": lambda x: x}[e.op](v), t)
        return t

    def _e_Cond(self, e: ast.Cond, scope: Scope) -> Type:
        self.expr(e.cond, scope)
        self.coerce(e.cond, BOOL, "condition")
        a, b = self.expr(e.then, scope), self.expr(e.other, scope)
        if a is INFINT and b is not INFINT:
            self.coerce(e.then, b, "'?:' branch")
        elif b is INFINT and a is not INFINT:
            self.coerce(e.other, a, "'?:' branch")
        elif a != b:
            raise P4Error(e.loc, f"'?:' branches have different types {a} and {b}")
        if a is INFINT and b is INFINT and e.cond.value is None:
            raise P4Error(e.loc, "'?:' with unsized integer branches needs a constant condition")
        if e.cond.value is not None:
            e.value = e.then.value if e.cond.value else e.other.value
        return e.then.type

    def _e_Binary(self, e: ast.Binary, scope: Scope) -> Type:
        op = e.op
        lt, rt = self.expr(e.left, scope), self.expr(e.right, scope)
        lv, rv = e.left.value, e.right.value
        if op in ("&&", "||"):
            self.coerce(e.left, BOOL, f"operand of '{op}'")
            self.coerce(e.right, BOOL, f"operand of '{op}'")
            if lv is not None and rv is not None:
                e.value = (lv and rv) if op == "&&" else (lv or rv)
            return BOOL
        if op in ("<<", ">>"):
            if not is_numeric(lt) or not is_numeric(rt):
                raise P4Error(e.loc, f"'{op}' needs integer operands, got {lt} and {rt}")
            if isinstance(rt, BitsT) and rt.signed:
                raise P4Error(e.right.loc, "a shift amount must be unsigned")
            if rv is not None and rv < 0:
                raise P4Error(e.right.loc, "a shift amount must not be negative")
            if lt is INFINT and rv is None:
                raise P4Error(e.loc, "shifting an unsized integer needs a constant shift amount")
            if lv is not None and rv is not None:
                e.value = wrap(lv << rv if op == "<<" else lv >> rv, lt)
            return lt
        if op == "++":
            if not (isinstance(lt, BitsT) and isinstance(rt, BitsT)):
                raise P4Error(e.loc, f"'++' needs bit<W>/int<W> operands, got {lt} and {rt}")
            t = BitsT(lt.width + rt.width, lt.signed)
            if lv is not None and rv is not None:
                e.value = wrap(((lv & lt.mask) << rt.width) | (rv & rt.mask), t)
            return t
        # p4c's first ConstantFolding and its unsBinaryArith judge / and % before binaryArith
        folded = op in ("/", "%") and self.division_before_types(e)
        if op in ARITH_OPS:
            self.ser_enum_operands(e)  # p4c's binaryArith: a serializable enum is its underlying type
            lt, rt = e.left.type, e.right.type
        # both operands of one type
        t = self._unify(e, lt, rt)
        lv, rv = e.left.value, e.right.value  # an unsized operand now holds its wrapped value
        if op in ("==", "!="):
            if isinstance(t, (ExternT, BlockT, TableT, TupleT)) or t in (VOID, STRING):
                raise P4Error(e.loc, f"cannot compare values of type {t}")
            if lv is not None and rv is not None:
                e.value = (lv == rv) if op == "==" else (lv != rv)
            return BOOL
        if not is_numeric(t):
            raise P4Error(e.loc, f"operator '{op}' needs integers, got {t}")
        if op in ("<", ">", "<=", ">="):
            if lv is not None and rv is not None:
                e.value = {"<": lv < rv, ">": lv > rv, "<=": lv <= rv, ">=": lv >= rv}[op]
            return BOOL
        if op in ("|+|", "|-|") and t is INFINT:
            raise P4Error(e.loc, f"'{op}' needs fixed-width operands")
        if op in ("/", "%") and not folded and self.division(e, t, lv, rv):
            return t
        if lv is not None and rv is not None:
            e.value = fold_arith(op, lv, rv, t)
        return t

    def _unify(self, e: ast.Binary, lt: Type, rt: Type) -> Type:
        if lt == rt:
            return lt
        if lt is INFINT and isinstance(rt, BitsT):
            self.coerce(e.left, rt, f"operand of '{e.op}'")
            return rt
        if rt is INFINT and isinstance(lt, BitsT):
            self.coerce(e.right, lt, f"operand of '{e.op}'")
            return lt
        raise P4Error(e.loc, f"operator '{e.op}' cannot combine {lt} and {rt}")

    def _e_CtorCall(self, e: ast.CtorCall, scope: Scope) -> Type:
        raise P4Error(e.loc, "constructor calls are only allowed in instantiations")

    def _e_NamedArg(self, e: ast.NamedArg, scope: Scope) -> Type:
        return self.expr(e.arg, scope)  # put in parameter order by _check_args

    def _e_Mask(self, e: ast.Mask, scope: Scope) -> Type:
        raise P4Error(e.loc, "'&&&' is only allowed in keysets")

    def _e_Range(self, e: ast.Range, scope: Scope) -> Type:
        raise P4Error(e.loc, "'..' is only allowed in keysets")

    # ================================================================ calls
    def _e_Call(self, e: ast.Call, scope: Scope) -> Type:
        f = e.func
        for a in e.args:
            if not isinstance(a, ast.Default):
                self.expr(a, scope)
        explicit = [self.resolve_type(t) for t in e.type_args]
        self.env.pending_type_args, self.env.call_loc = explicit or None, e.loc
        try:
            t = self._e_call_target(e, f, scope)
        finally:
            pending, self.env.pending_type_args = self.env.pending_type_args, None
        if pending:
            raise P4Error(e.loc, "explicit type arguments are not supported for this call by the built-in target")
        self.forget_after_call(e)
        return t

    def _e_call_target(self, e: ast.Call, f: ast.Expr, scope: Scope) -> Type:
        if isinstance(f, ast.PathExpr):
            self.expr(f, scope)
            d = f.decl
            if isinstance(d, ast.ActionDecl):
                return self._call_action(e, d, scope)
            if isinstance(d, ast.ExternFunction):
                return self._call_function(e, d)
            if isinstance(d, ast.FunctionDecl):
                return self._call_user_function(e, d, scope)
            raise P4Error(f.loc, f"'{f.name}' is not callable")
        if isinstance(f, ast.Member):
            bt = self.expr(f.base, scope)
            m = f.member
            if isinstance(bt, HeaderT) and (bt.is_header and m in HEADER_METHODS or bt.is_union and m == "isValid"):
                self._arity(e, 0)
                if m in ("setValid", "setInvalid"):
                    self.lvalue(f.base)
                e.target = CallTarget("header_method", m, instance=f.base)
                if m.startswith(("min", "max")):  # sizes are constants; a varbit counts 0 / its maximum
                    bits = bt.width + (bt.fields[bt.varbit_field].max_width if "max" in m and bt.varbit_field else 0)
                    e.value = bits if m.endswith("Bits") else (bits + 7) // 8
                    return INFINT
                return BOOL if m == "isValid" else VOID
            if isinstance(bt, StackT) and m in ("push_front", "pop_front"):
                self._arity(e, 1)
                count = self.const_int(e.args[0])
                if count < 0:
                    raise P4Error(e.args[0].loc, f"{m} needs a non-negative count")
                self.lvalue(f.base)
                if bt.elem.is_union:
                    raise P4Error(e.loc, f"{m} on a stack of header unions is not supported by the built-in target")
                e.target = CallTarget("stack_method", m, instance=f.base)
                return VOID
            if isinstance(bt, TableT) and m == "apply":
                self._arity(e, 0)
                if isinstance(scope.owner, (ast.ActionDecl, ast.FunctionDecl)):
                    raise P4Error(e.loc, "tables cannot be applied inside actions or functions")
                e.target = CallTarget("table_apply", "apply", bt.decl)
                self.env.used.add(bt.decl)
                self.apply_key_divisions(bt.decl)
                return ApplyResultT(bt.decl)
            if isinstance(bt, BlockT) and m == "apply" and isinstance(bt.decl, ast.ControlDecl):
                if not isinstance(f.base, ast.PathExpr) or not isinstance(f.base.decl, ast.Instantiation):
                    raise P4Error(e.loc, "apply a control through its instance")
                self._check_args(e.loc, bt.decl.params, e.args, {})
                e.target = CallTarget("block_apply", "apply", f.base.decl)
                return VOID
            if isinstance(bt, BlockT) and m == "apply" and isinstance(bt.decl, ast.ParserDecl):
                return self.parser_apply(e, f, bt, scope)
            if isinstance(bt, ExternT):
                return self._call_method(e, bt, m, f.base)
            raise P4Error(f.loc, f"{bt} has no method '{m}'")
        if isinstance(f, ast.TypeMember) and isinstance(self.env.types.get(f.type_name),
                                                        (ast.ControlDecl, ast.ParserDecl)):
            return self.direct_apply(e, f, scope)  # `MyControl.apply(...)` (instances.py)
        raise P4Error(e.loc, "this expression is not callable")

    def _arity(self, e: ast.Call, n: int) -> None:
        if len(e.args) != n:
            raise P4Error(e.loc, f"expected {n} arguments, got {len(e.args)}")

    def _call_action(self, e: ast.Call, d: ast.ActionDecl, scope: Scope) -> Type:
        if isinstance(scope.owner, ast.ParserDecl):
            raise P4Error(e.loc, "actions cannot be called from a parser")
        self._check_args(e.loc, d.params, e.args, {})
        e.target = CallTarget("action", d.name, d)
        self.env.used.add(d)
        self.bind_params(d, d.params, e.args, data=False)
        return VOID

    def _static_assert(self, e: ast.Call) -> None:
        """core.p4's ``static_assert(check[, message])``: true, or the program is refused."""
        check = e.args[0]
        if not isinstance(check.value, bool):
            raise P4Error(check.loc, "static_assert needs a compile-time condition")
        if not check.value:
            text = e.args[1].value if len(e.args) > 1 else "static_assert failed"
            raise P4Error(e.loc, f"static assertion failed: {text}")
        e.value = True

    def _call_function(self, e: ast.Call, d: ast.ExternFunction) -> Type:
        if d.name in FIELD_LIST_FORMS:
            raise P4Error(e.loc, f"{d.name}: unknown extern function (p4c-bm2-ss's words: it dropped the field "
                          f"list forms in 2021): use {FIELD_LIST_FORMS[d.name]} with @field_list")
        if d.name not in SUPPORTED_FUNCTIONS:
            raise P4Error(e.loc, f"extern function '{d.name}' is not supported by the built-in target")
        d = next((o for o in self.env.overloads.get(d.name, []) if len(o.proto.params) == len(e.args)), d)
        bindings: dict[str, Type] = {}
        self._check_args(e.loc, d.proto.params, e.args, bindings, d.proto.type_params)
        if d.name in ("hash", "verify_checksum", "update_checksum"):
            algo = e.args[1] if d.name == "hash" else e.args[3]
            if algo.value is None or not isinstance(algo.type, EnumT):
                raise P4Error(algo.loc, "the hash algorithm must be a constant HashAlgorithm member")
            name = algo.type.members[algo.value]
            if name not in SUPPORTED_HASHES:
                raise P4Error(algo.loc, f"hash algorithm {name} is not supported by the built-in target")
            if d.name != "hash" and name != "csum16":
                raise P4Error(algo.loc, f"{d.name} supports only HashAlgorithm.csum16")
            data = e.args[3] if d.name == "hash" else e.args[1]
            self._hash_data(data, varbit_ok=d.name != "hash")
            if d.name == "hash":
                for a in (e.args[0], e.args[2], e.args[4]):
                    if not isinstance(a.type, BitsT):
                        raise P4Error(a.loc, f"hash needs bit<W> values here, got {a.type}")
            else:
                if e.args[2].type != BitsT(16):
                    raise P4Error(e.args[2].loc, "the checksum field must be bit<16>")
        if d.name == "static_assert":
            self._static_assert(e)
        if d.name in V1MODEL_FUNCTIONS:
            self._v1model_function(e, d.name)
        e.target = CallTarget("function", d.name, d)
        return self.resolve_return(d.proto, bindings)

    def _v1model_function(self, e: ast.Call, name: str) -> None:
        """Arguments the executor needs at load time (indexes, strings, algorithms)."""
        args = e.args
        if name in ("clone", "clone_preserving_field_list") and args[0].value is None:
            raise P4Error(args[0].loc, "the clone type must be a constant CloneType member")
        if name.endswith("_preserving_field_list") and args[-1].value is None:
            raise P4Error(args[-1].loc, "the field list index must be a compile-time constant")
        if name == "log_msg" and not isinstance(args[0], ast.StringLit):
            raise P4Error(args[0].loc, "log_msg needs a string literal")
        if name == "digest":
            data = args[1].type
            if isinstance(data, TupleT):
                raise P4Error(args[1].loc, f"digest of a {data} is not supported by the built-in target: "
                              "name a struct type, digest<S>(receiver, {...})")
            if not (isinstance(data, HeaderT) and not data.is_header):
                raise P4Error(args[1].loc, f"digest of a {data} is not supported by the built-in target: use a struct")
        if name == "random" and not isinstance(args[0].type, BitsT):
            raise P4Error(args[0].loc, f"random needs bit<W>, got {args[0].type}")
        if name.endswith("_with_payload"):
            algo = args[3]
            if algo.value is None or not isinstance(algo.type, EnumT) or algo.type.members[algo.value] != "csum16":
                raise P4Error(algo.loc, f"{name} supports only HashAlgorithm.csum16 on the built-in target")
            self._hash_data(args[1], varbit_ok=True)
            if args[2].type != BitsT(16):
                raise P4Error(args[2].loc, "the checksum field must be bit<16>")

    def _hash_data(self, data: ast.Expr, varbit_ok: bool = False) -> None:
        """The inputs of hash and checksum calls.  Checksums may hold varbit fields (BMv2
        sums their extracted bits, e.g. IPv4 options); hash inputs may not.  As p4c's BMv2
        field lists, nested lists, structs and tuples are flattened field by field."""
        items = data.items if isinstance(data, ast.ListExpr) else [data]
        for item in items:
            t = item.type
            if isinstance(item, ast.ListExpr):
                self._hash_data(item, varbit_ok)
                continue
            if isinstance(t, HeaderT) and not t.is_header:
                self._hash_fields(item, t)
                continue
            if isinstance(t, VarbitT) or isinstance(t, HeaderT) and t.varbit_field is not None:
                in_header = isinstance(item, ast.Member) and isinstance(item.base.type, HeaderT) and \
                    item.base.type.is_header
                if varbit_ok and (isinstance(t, HeaderT) and t.is_header or in_header):
                    continue
                raise P4Error(item.loc, "varbit fields in hash inputs (or outside a header in checksum inputs) "
                              "are not supported by the built-in target")
            try:
                bit_width(item.type)
            except TypeError:
                raise P4Error(item.loc, f"cannot hash a value of type {item.type}") from None

    def _hash_fields(self, item: ast.Expr, t: Type) -> None:
        """A struct, tuple or union in a hash or checksum input: every field must have a width."""
        if isinstance(t, HeaderT) and not (t.is_header and t.varbit_field is None):
            for ft in t.fields.values():
                self._hash_fields(item, ft)
            return
        try:
            bit_width(t)
        except TypeError:
            raise P4Error(item.loc, f"cannot hash a value of type {t} (in {item.type})") from None

    def _call_method(self, e: ast.Call, t: ExternT, m: str, base: ast.Expr) -> Type:
        ext = t.decl
        if m not in SUPPORTED_METHODS.get(ext.name, ()):
            raise P4Error(e.loc, f"{ext.name}.{m} is not supported by the built-in target")
        proto = next((p for p in ext.methods if p.name == m and self._arity_fits(p.params, e.args)), None)
        if proto is None:
            raise P4Error(e.loc, f"no method {ext.name}.{m} takes {len(e.args)} arguments")
        bindings = dict(zip(ext.type_params, t.args))
        self._check_args(e.loc, present_params(proto.params, e.args), e.args, bindings, proto.type_params)
        if ext.name in TNA_METHODS:
            self.tna_method(e, ext, m)
        if ext.name == "packet_in" and m == "extract":
            target = e.args[0]
            if isinstance(target, ast.Default):  # `extract<h_t>(_)`: the bytes are read into a temporary
                bound = bindings.get(proto.type_params[0]) if proto.type_params else None
                if bound is None:
                    raise P4Error(target.loc, "extract into '_' needs the header type: extract<H>(_)")
                target.type = bound
            if not (isinstance(target.type, HeaderT) and target.type.is_header):
                raise P4Error(target.loc, f"extract needs a header, got {target.type}")
            if (target.type.varbit_field is None) != (len(e.args) == 1):  # as p4c: the length iff a varbit
                raise P4Error(e.loc, f"extract of header {target.type} needs "
                              f"{'one argument' if len(e.args) == 2 else 'two arguments (it has a varbit field)'}")
        if ext.name == "packet_out" and m == "emit":
            arg_t = e.args[0].type
            if not (isinstance(arg_t, (HeaderT, StackT))):
                raise P4Error(e.args[0].loc, f"emit needs a header, stack or struct, got {arg_t}")
        if ext.name in ("meter", "direct_meter"):
            out = e.args[-1]
            if not (isinstance(out.type, BitsT) and out.type.width >= 2):
                raise P4Error(out.loc, f"a meter colour needs bit<W> with W >= 2, got {out.type}")
        if ext.name == "register":
            elem = t.args[0]
            if not (isinstance(elem, BitsT) or elem is BOOL):
                raise P4Error(e.loc, f"register<{elem}> is not supported by the built-in target: use bit<W> or int<W>")
        e.target = CallTarget("method", m, ext, instance=base)
        return self.resolve_return(proto, bindings)

    def resolve_return(self, proto: ast.FunctionProto, bindings: dict[str, Type]) -> Type:
        saved, self.env.type_vars = self.env.type_vars, {**bindings}
        try:
            for tp in proto.type_params:
                self.env.type_vars.setdefault(tp, TypeVar(tp))
            return self.resolve_type(proto.return_type)
        finally:
            self.env.type_vars = saved

    def _check_args(self, loc, params: list[ast.Param], args: list[ast.Expr], bindings: dict[str, Type],
                    type_params: list[str] | None = None) -> None:
        """Arity, directions and types of arguments; binds the callee's type variables."""
        self._normalize_args(loc, params, args)
        self._take_type_args(bindings, type_params)
        if len(args) != len(params):
            raise P4Error(loc, f"expected {len(params)} arguments, got {len(args)}")
        for p, a in zip(params, args):
            if isinstance(a, ast.Default):
                if p.direction != "out":
                    raise P4Error(a.loc, "'_' can only be passed to an out parameter")
                continue
            pt = self._param_type(p, bindings, type_params or [])
            if isinstance(pt, TypeVar):
                if a.type is INFINT or _holds_infint(a.type):
                    raise P4Error(a.loc, f"cannot infer a width for parameter '{p.name}': give the constant a width")
                bindings[pt.name] = a.type
                pt = a.type
            self.coerce(a, pt, f"argument '{p.name}'")
            if p.direction in ("out", "inout"):
                self.lvalue(a)

    def _param_type(self, p: ast.Param, bindings: dict[str, Type], type_params: list[str]) -> Type:
        saved = self.env.type_vars
        self.env.type_vars = {**{tp: TypeVar(tp) for tp in type_params}, **bindings}
        try:
            return self.resolve_type(p.type_ref)
        finally:
            self.env.type_vars = saved

    # ================================================================ the package
    def _pipeline(self, main: ast.Instantiation) -> Pipeline:
        t = main.type
        if not (isinstance(t, BlockT) and t.decl.name == "V1Switch"):
            raise P4Error(main.loc, f"package {t} is not supported by the built-in target: "
                          "it runs v1model programs, whose main is a V1Switch(...)")
        if len(main.args) != len(PIPELINE_BLOCKS):
            raise P4Error(main.loc, f"V1Switch takes {len(PIPELINE_BLOCKS)} arguments, got {len(main.args)}")
        blocks: dict[str, Any] = {}
        for role, arg, param in zip(PIPELINE_BLOCKS, main.args, t.decl.params):
            if not isinstance(arg, ast.CtorCall):
                raise P4Error(arg.loc, f"V1Switch argument '{param.name}' must be a parser/control instantiation")
            decl = self.env.types.get(arg.type_ref.name)
            if not isinstance(decl, (ast.ParserDecl, ast.ControlDecl)):
                raise P4Error(arg.loc, f"'{arg.type_ref.name}' is not a parser or control")
            decl = self.block_instance(arg.loc, decl, arg.args, self.env.globals)
            expected = self.env.types[param.type_ref.name]
            if not isinstance(decl, ast.ParserDecl if expected.kind == "parser" else ast.ControlDecl):
                raise P4Error(arg.loc, f"V1Switch argument '{param.name}' must be a {expected.kind}")
            if len(decl.params) != len(expected.params):
                raise P4Error(decl.loc, f"{decl.name} must take {len(expected.params)} parameters "
                              f"like v1model's {expected.name}")
            blocks[role] = decl
        headers = blocks["parser"].params[1].type
        metadata = blocks["parser"].params[2].type
        for name, pt in (("headers", headers), ("metadata", metadata)):
            if not (isinstance(pt, HeaderT) and pt.kind == "struct"):
                raise P4Error(blocks["parser"].loc, f"the parser's {name} parameter must be a struct")
        for arg, want in zip(main.type_ref.args, (headers, metadata)):  # V1Switch<H, M>(...)
            if self.resolve_type(arg) != want:
                raise P4Error(arg.loc, f"V1Switch type argument {self.resolve_type(arg)} does not match "
                              f"the parser's {want}")
        saved, self.env.type_vars = self.env.type_vars, {"H": headers, "M": metadata}
        try:
            for decl, param in zip(blocks.values(), t.decl.params):
                expected = self.env.types[param.type_ref.name]
                for p, ep in zip(decl.params, expected.params):
                    want = self.resolve_type(ep.type_ref)
                    if p.type != want or p.direction != ep.direction:
                        raise P4Error(p.loc, f"parameter '{p.name}' of {decl.name} must be "
                                      f"'{ep.direction} {want}' for v1model's {expected.name}")
        finally:
            self.env.type_vars = saved
        return Pipeline(main, blocks, headers, metadata)


def _flatten_slice(e: ast.Slice, hi: int, lo: int) -> None:
    """``x[7:4][3:0][1:0]`` selects ``x[5:4]``: rewrite a checked slice of a slice as one slice
    of the innermost value, so the executor reads and writes it (also as an ``out``
    argument) like any slice.  ``written`` keeps the nesting for P4Runtime key names."""
    inner = e.base
    assert isinstance(inner, ast.Slice)
    offset = inner.lo.value
    e.written = ast.Slice(e.loc, inner, e.hi, e.lo)
    e.written.type = BitsT(hi - lo + 1)
    bounds = []
    for at, bit in ((e.hi.loc, hi + offset), (e.lo.loc, lo + offset)):
        lit = ast.IntLit(at, bit, None, False)
        lit.value, lit.type = bit, INFINT
        bounds.append(lit)
    e.base, (e.hi, e.lo) = inner.base, bounds


def _holds_infint(t: Type) -> bool:
    """A list expression's tuple type with an unsized integer in it (no width to bind)."""
    return isinstance(t, TupleT) and any(x is INFINT or _holds_infint(x) for x in t.elems)



def _constant_list(e: ast.Expr) -> bool:
    """A struct initialiser of constants (TNA's ``Register(size, {0, 0})``)."""
    return isinstance(e, ast.ListExpr) and all(i.value is not None or _constant_list(i) for i in e.items)


def check(program: ast.Program) -> CheckedProgram:
    return Checker(program).check()


@dataclass
class Declarations:
    """The top-level constants and types of a file with no pipeline (e.g. a protocol header
    file that Python reads so the layout is written down only once)."""

    constants: dict[str, Any]
    types: dict[str, Any]


def check_declarations(program: ast.Program) -> Declarations:
    checker = Checker(program)
    for decl in program.decls:
        checker._top_level(decl)
    constants = {d.name: d.init.value for d in program.decls if isinstance(d, ast.ConstDecl)}
    return Declarations(constants, checker.env.types)
