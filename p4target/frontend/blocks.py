"""Parsers and controls (a pass of the checker, env.py): parameters, locals, parser states
and their selects, value sets, actions, and v1model's ``V1Switch`` package.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from . import ast, initializers, stages
from .calls import target_only
from .env import Pass
from .errors import P4Error
from .program import Pipeline
from .scope import Scope
from .source_text import find_after
from .types import (
    BOOL,
    ERROR,
    INFINT,
    BitsT,
    BlockT,
    EnumT,
    ExternT,
    HeaderT,
    TupleT,
    Type,
    TypeVar,
)

PIPELINE_BLOCKS = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")


class Blocks(Pass):
    """Parsers, controls and the v1model package."""

    def params(self, params: list[ast.Param], scope: Scope) -> None:
        for p in params:
            p.type = self.env.decls.resolve_type(p.type_ref)
            if p.type is INFINT and p.direction:  # p4c's TypeInference (Parameter): int has no storage
                raise P4Error(p.loc, f"{p.name}: parameters with type int must be directionless")
            if p.default is not None and p.direction in ("out", "inout"):  # p4c's TypeInference (actions too)
                raise P4Error(p.loc, f"{p.name}: {p.direction} parameters cannot have default values")
            initializers.parameter_default(self.env, p)
            if p.default is not None and p.default.type is None:
                self.env.exprs.expr(p.default, self.env.globals)
                self.env.exprs.coerce(p.default, p.type, f"default value of '{p.name}'")
                if p.default.value is None:
                    raise P4Error(p.default.loc, "a default parameter value that is not a compile-time constant "
                                  "is not supported by the built-in target")
            scope.declare(p)

    def generic_block(self, decl: ast.ParserDecl | ast.ControlDecl) -> None:
        """p4c's TypeInference checks a generic parser or control once, its type parameters type
        variables (a value of one is only of that type), on a copy as calls.generic_body does; the
        built-in target runs none: refused after every error p4c would give."""
        for p in [*decl.params, *decl.ctor_params]:  # p4c: a parameter named as a type parameter
            if p.name in decl.type_params:
                raise P4Error(p.loc, f"Re-declaration of {p.name} with different type: " if p in decl.params
                              else f"{p.name} duplicates {p.name}.")
        saved = self.env.type_vars, self.env.generic_names, self.env.frontend, set(self.env.used)
        self.env.type_vars = {**saved[0], **{t: TypeVar(t) for t in decl.type_params}}
        self.env.generic_names = saved[1] | set(decl.type_params)
        self.env.frontend = True  # p4c's rules only (the target refuses the block, below)
        try:
            spec = copy.deepcopy(decl)
            spec.type_params, spec.ctor_params = [], []
            values = {}
            for p in decl.ctor_params:  # unbound constructor parameters: values of their types
                values[p.name] = copy.copy(p)
                values[p.name].type = self.env.decls.resolve_type(p.type_ref)
            self.block(spec, None, decl, values)
        except P4Error as err:
            if not target_only(err):
                raise
        finally:  # what the copy uses is used by no block the target runs (its later passes' refusals stay)
            self.env.type_vars, self.env.generic_names, self.env.frontend = saved[:3]
            self.env.used &= saved[3]
        if not self.env.frontend:
            kind = "parser" if isinstance(decl, ast.ParserDecl) else "control"
            stages.defer(self.env, stages.TARGET, P4Error(
                decl.loc, f"generic {kind}s are not supported by the built-in target"))

    def generic_instance(self, inst: ast.Instantiation, t: BlockT, scope: Scope) -> None:
        """``C<bit<8>>(...) c;``: the constructor arguments checked against the parameters with the
        type arguments bound (the body was checked generically; the target refuses the block)."""
        decl = t.decl
        bindings = dict(zip(decl.type_params, (self.env.decls.resolve_type(a) for a in inst.type_ref.args)))
        for a in inst.args:
            if not isinstance(a, ast.Default):
                self.env.exprs.expr(a, scope)
        self.env.calls.check_args(inst.loc, decl.ctor_params, inst.args, bindings, decl.type_params)

    def block(self, decl: ast.ParserDecl | ast.ControlDecl, consts: list[ast.ConstDecl] | None = None,
               origin: Any = None, instances: dict[str, ast.Instantiation] | None = None) -> None:
        """``consts``: the constructor parameters, bound to an instance's arguments; ``instances``:
        those bound to an instance of the caller's, which the parameter's name then names."""
        scope = Scope(self.env.globals, decl)
        for c in consts or []:
            scope.declare(c)
        scope.values.update(instances or {})
        self.params(decl.params, scope)
        self.env.instances.open_block(origin or decl)
        try:
            with self.env.divisions.fresh_values():  # a control's initialised locals are known in its apply block
                for local in decl.locals:  # (p4c's MoveInitializers puts them at its start)
                    self._local(local, scope)
                if isinstance(decl, ast.ParserDecl):
                    self._parser_states(decl, scope)
                else:
                    self.env.stmts.stmt(decl.body, Scope(scope, decl))
        finally:
            self.env.instances.close_block()

    def _local(self, local: ast.Decl, scope: Scope) -> None:
        if isinstance(local, ast.VarDecl):
            self.env.stmts.var_decl(local, scope)
        elif isinstance(local, ast.ConstDecl):
            self.env.decls.const_decl(local, scope)
            scope.declare(local)
        else:  # a table, an action, an instance's methods: bodies of their own
            with self.env.divisions.fresh_values(local if isinstance(local, ast.TableDecl) else None):
                self._other_local(local, scope)

    def _other_local(self, local: ast.Decl, scope: Scope) -> None:
        if isinstance(local, ast.Instantiation):
            self.env.decls.instantiation(local, scope)
            scope.declare(local)
        elif isinstance(local, ast.ActionDecl):
            scope.declare(local)
            self.action(local, scope)
        elif isinstance(local, ast.TableDecl):
            scope.declare(local)
            self.env.tables.table(local, scope)
        elif isinstance(local, ast.FunctionDecl):
            self.env.calls.function(local, scope)
        elif isinstance(local, ast.ValueSetDecl) and isinstance(scope.owner, ast.ParserDecl):
            self._value_set(local, scope)
            scope.declare(local)
        else:
            raise P4Error(local.loc, f"{type(local).__name__} is not supported here")

    def _parser_states(self, decl: ast.ParserDecl, scope: Scope) -> None:
        names = {s.name: s for s in decl.states}
        twice = next((s for i, s in enumerate(decl.states) if s.name in {x.name for x in decl.states[:i]}), None)
        if twice is not None:  # p4c: at the second state's name
            raise P4Error(find_after(twice.loc, rf"\bstate\s+({re.escape(twice.name)})\b", group=1),
                          f"{twice.name}: Duplicates declaration {twice.name}")
        built_in = next((s for s in decl.states if s.name in ("accept", "reject")), None)
        if built_in is not None:  # p4c's ValidateParsedProgram, at the state's name
            raise P4Error(find_after(built_in.loc, rf"\bstate\s+({built_in.name})\b", group=1),
                          f"Invalid parser state: {built_in.name} should not be implemented, it is built-in")
        if "start" not in names:
            raise P4Error(decl.loc, f"parser {decl.name} has no 'start' state")
        for reserved in ("accept", "reject"):
            if reserved in names:
                raise P4Error(names[reserved].loc, f"state '{reserved}' is predefined")
        for state in decl.states:
            with self.env.divisions.fresh_values():  # p4c's LocalCopyPropagation: one state at a time
                self._parser_state(state, names, Scope(scope, decl))
        if not {"accept", "reject"} & _reachable(names):  # p4c's SimplifyParsers, a late frontend stage
            stages.defer(self.env, stages.SIMPLIFY_PARSERS,
                         P4Error(decl.loc, f"parser {decl.name}: Parser never reaches accept or reject state"))

    def _parser_state(self, state: ast.ParserState, names: dict[str, ast.ParserState], inner: Scope) -> None:
        state.stmts = [self.env.stmts.stmt(s, inner) for s in state.stmts]
        self.env.instances.check_parser_apply_places(state)
        tr = state.transition
        targets = [(tr.state, tr.loc)] if tr.state else [(c.state, c.loc) for c in tr.cases or []]
        for t, loc in targets:
            if t in names or t in ("accept", "reject"):
                continue
            if tr.state is None and inner.lookup(t) is not None:  # p4c: at the select case
                raise P4Error(loc, "SelectCase must be state")
            raise P4Error(loc, f"{t}: declaration not found")  # p4c's ResolveReferences
        if tr.select is not None:
            self._select(tr, inner)

    def _select(self, tr: ast.Transition, scope: Scope) -> None:
        types = []
        for e in tr.select:
            t = self.env.exprs.expr(e, scope)
            if not (isinstance(t, BitsT) or t is BOOL or isinstance(t, EnumT) or t is ERROR):
                raise P4Error(e.loc, f"cannot select on a value of type {t}")
            types.append(t)
        for case in tr.cases:
            if len(case.keyset) == 1 and isinstance(case.keyset[0], ast.Default):
                continue
            if self._value_set_case(case, types, scope):
                continue
            # p4c's TypeInference reports a keyset that does not fit at the select ('SelectExpression')
            select_loc = find_after(tr.loc, r"\bselect\b")
            if len(case.keyset) != len(types):
                raise P4Error(select_loc, f"'SelectExpression': keyset has {len(case.keyset)} elements, "
                              f"select has {len(types)}")
            for ks, t in zip(case.keyset, types):
                try:
                    self.keyset_element(ks, t, scope)
                except P4Error as err:
                    if not err.message.startswith("keyset: expected") or not self._parts_agree(ks, scope):
                        raise  # a mask's or range's parts disagree: p4c says so at the element
                    raise P4Error(select_loc, f"'SelectExpression': {err.message}") from None

    def _parts_agree(self, ks: ast.Expr, scope: Scope) -> bool:
        """Whether a mask's or range's two parts have one type (p4c's typeSet: else it refuses the
        element itself; when they agree, only the set's type can differ from the select's)."""
        if not isinstance(ks, (ast.Mask, ast.Range)):
            return True
        a, b = (ks.base, ks.mask) if isinstance(ks, ast.Mask) else (ks.lo, ks.hi)
        ta, tb = (self.env.exprs.expr(x, scope) for x in (a, b))  # as written (a keyset coerced its constants)
        return ta is INFINT or tb is INFINT or ta == tb

    def keyset_element(self, ks: ast.Expr, t: Type, scope: Scope) -> None:
        """A select case or const entry element: value, mask, range or default."""
        parts = {ast.Mask: ("base", "mask"), ast.Range: ("lo", "hi")}.get(type(ks), ())
        if isinstance(ks, ast.Default):
            ks.type = t
            return
        for attr in parts or ("self",):
            e = ks if attr == "self" else getattr(ks, attr)
            self.env.exprs.expr(e, scope)
            if isinstance(e, ast.Dots) and not self.env.frontend:  # a default value as a keyset
                stages.defer(self.env, stages.TARGET, P4Error(
                    e.loc, "'...' in a keyset is not supported by the built-in target"))
            if parts and isinstance(t, EnumT) and t.underlying is not None and e.type != t:
                self.env.exprs.coerce(e, t.underlying, "keyset")  # a mask or bound of a serializable enum key
            else:
                self.env.exprs.coerce(e, t, "keyset")
            if e.value is None:
                raise P4Error(e.loc, "keyset values must be compile-time constants")
        if parts and not (isinstance(t, BitsT) or (isinstance(t, EnumT) and t.underlying is not None)):
            raise P4Error(ks.loc, f"masks and ranges need a bit<W> value, not {t}")
        ks.type = t

    def _value_set(self, decl: ast.ValueSetDecl, scope: Scope) -> None:
        """P4Runtime's value set element types: bit<W>, a struct of bit<W>, a serializable enum."""
        t = decl.type = self.env.decls.resolve_type(decl.type_ref)
        if isinstance(t, TupleT):  # P4Runtime names a value set's fields after a struct's
            raise P4Error(decl.type_ref.loc, f"value_set<{t}> is not supported by the built-in target: "
                          "use a struct of bit<W> fields")
        fields = list(t.fields.values()) if isinstance(t, HeaderT) and t.kind == "struct" else [t]
        for f in fields:
            if not (isinstance(f, BitsT) and not f.signed or isinstance(f, EnumT) and f.underlying is not None):
                raise P4Error(decl.type_ref.loc, f"value_set<{t}> is not supported by the built-in target: "
                              "use bit<W>, a struct of bit<W> fields or a serializable enum")
        self.env.exprs.expr(decl.size, scope)
        if self.env.exprs.const_int(decl.size) < 0:
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

    def action(self, decl: ast.ActionDecl, scope: Scope) -> None:
        inner = Scope(scope, decl)
        self.params(decl.params, inner)
        seen_data = False
        for p in decl.params:
            if p.direction == "":
                seen_data = True
            elif seen_data:
                raise P4Error(p.loc, "directional parameters must come before action data parameters")
            if p.direction == "" and p.type is INFINT:  # p4c's TypeInference (P4Action)
                raise P4Error(p.loc, f"{p.name}: actions cannot have parameters with type int")
            if isinstance(p.type, ExternT):
                raise P4Error(p.loc, f"{p.type}: Action parameters cannot have extern types")
            if p.direction == "" and not (isinstance(p.type, BitsT) or p.type is BOOL):
                err = P4Error(p.loc, f"action data parameter '{p.name}' must be bit<W>, int<W> or bool")
                if not self.env.frontend:
                    raise err
                if not (isinstance(p.type, EnumT) and p.type.underlying is not None):  # p4test takes those
                    stages.defer(self.env, stages.TARGET, err)  # p4c's type errors on its uses come first
        with self.env.divisions.fresh_values(decl, decl.params):
            self.env.stmts.stmt(decl.body, inner)

    # ---------------------------------------------------------------- the package
    def pipeline(self, main: ast.Instantiation) -> Pipeline:
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
            if decl.type_params:  # checked generically (generic_block), run by no target here
                raise P4Error(decl.loc, f"generic {'parser' if isinstance(decl, ast.ParserDecl) else 'control'}s "
                              "are not supported by the built-in target")
            decl = self.env.instances.block_instance(arg.loc, decl, arg.args, self.env.globals)
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
            if self.env.decls.resolve_type(arg) != want:
                raise P4Error(arg.loc, f"V1Switch type argument {self.env.decls.resolve_type(arg)} does not match "
                              f"the parser's {want}")
        saved, self.env.type_vars = self.env.type_vars, {"H": headers, "M": metadata}
        try:
            for decl, param in zip(blocks.values(), t.decl.params):
                expected = self.env.types[param.type_ref.name]
                for p, ep in zip(decl.params, expected.params):
                    want = self.env.decls.resolve_type(ep.type_ref)
                    if p.type != want or p.direction != ep.direction:
                        raise P4Error(p.loc, f"parameter '{p.name}' of {decl.name} must be "
                                      f"'{ep.direction} {want}' for v1model's {expected.name}")
        finally:
            self.env.type_vars = saved
        return Pipeline(main, blocks, headers, metadata)


def _reachable(states: dict[str, ast.ParserState]) -> set[str]:
    """The states a parser can reach from ``start`` (``accept``/``reject`` included)."""
    seen, todo = set(), ["start"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tr = states[name].transition if name in states else None
        if name in states and tr is None:
            todo.append("reject")  # a state with no transition rejects
        elif tr is not None:
            todo.extend([tr.state] if tr.state else [c.state for c in tr.cases or []])
    return seen
