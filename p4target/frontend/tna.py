"""Checker rules for TNA (Tofino Native Architecture) programs: ``Switch(Pipeline(...))``.

A pass of the checker (env.py).  A TNA program has six blocks (ingress parser, ingress,
ingress deparser, egress parser, egress, egress deparser) with their own header and
metadata types per gress; blocks may leave out trailing ``@optional`` parameters of
Intel's templates (IngressParserT ...).  Externs with abstract methods (RegisterAction)
are implemented at the instance, ``= { void apply(...) {...} }``; the implementation is
checked in the scope of the instance's control, so it can read headers and metadata as
bf-p4c allows.  What the executor does not run is refused here by name.
"""

from __future__ import annotations

import re
from itertools import zip_longest
from typing import Any

from . import ast
from .env import Pass
from .errors import P4Error
from .program import CheckedProgram, Pipeline
from .source_text import find_after
from .types import BOOL, BitsT, BlockT, EnumT, ExternT, HeaderT, Type

# Externs of tofino.p4 that the built-in target executes (executor/tna_codegen.py).
TNA_EXTERNS = {"Register", "RegisterAction", "Hash", "Checksum", "Counter", "DirectCounter"}
TNA_METHODS = {
    "RegisterAction": {"execute"},
    "Hash": {"get"},
    "Checksum": {"add", "subtract", "verify", "get", "update"},
    "Counter": {"count"},
    "DirectCounter": {"count"},
    "Register": set(),  # read/write: only through RegisterActions, as on Tofino
}
TNA_HASHES = {"IDENTITY", "CRC16", "CRC32"}
# The Pipeline's arguments, in order (the names CheckedProgram.pipeline.blocks uses).
TNA_BLOCKS = ("ingress_parser", "ingress", "ingress_deparser", "egress_parser", "egress", "egress_deparser")


def is_optional(p: ast.Param) -> bool:
    """Intel's ``@optional`` parameters may be left out by callers and implementations."""
    return ast.find_annotation(p.annotations, "optional") is not None


def present_params(params: list[ast.Param], args: list[ast.Expr]) -> list[ast.Param]:
    """The parameters a positional call binds: trailing ``@optional`` ones may be missing."""
    n = len(args)
    if n < len(params) and not any(isinstance(a, ast.NamedArg) for a in args) and all(
            is_optional(p) and p.default is None for p in params[n:]):
        return params[:n]
    return params


def is_tna_main(main: ast.Instantiation) -> bool:
    t = main.type
    return isinstance(t, BlockT) and isinstance(t.decl, ast.BlockTypeDecl) and t.decl.name == "Switch"


class Tna(Pass):
    """TNA pipelines and extern initialisers."""

    # ---------------------------------------------------------------- instances
    def extern_initializer(self, decl: ast.Instantiation, t: ExternT, scope: Any) -> None:
        """``RegisterAction<T, I, U>(reg) ra = { void apply(inout T v, out U rv) {...} };``"""
        ext = t.decl
        impls = decl.initializer or []
        if ext.abstracts and not impls:
            raise P4Error(decl.loc, f"{ext.name} {decl.name} must implement "
                          f"{', '.join(a.name for a in ext.abstracts)} (= {{ void apply(...) {{ ... }} }})")
        for f in impls:  # p4c's ResolveReferences, before its type checker
            for i, name in enumerate(f.proto.type_params):
                if name in f.proto.type_params[:i]:
                    raise P4Error(f.loc, f"{name}: Duplicates declaration {name}")
        if impls and not ext.abstracts:
            raise P4Error(decl.loc, f"{ext.name} has no abstract methods to implement")
        if ext.name == "Hash":
            algo = decl.args[0]
            name = algo.type.members[algo.value] if isinstance(algo.type, EnumT) else "?"
            if name not in TNA_HASHES:
                raise P4Error(algo.loc, f"Hash algorithm {name} is not supported by the built-in target "
                              f"(use {', '.join(sorted(TNA_HASHES))})")
            if not isinstance(t.args[0], BitsT):
                raise P4Error(decl.loc, f"Hash<{t.args[0]}> needs a bit<W> width")
        if ext.name == "Register":
            self._register_type(decl, t.args[0])
        bindings = dict(zip(ext.type_params, t.args))
        seen: set[str] = set()
        for f in impls:
            proto = next((a for a in ext.abstracts if a.name == f.name), None)
            if proto is None:
                raise P4Error(f.loc, f"{ext.name} has no abstract method '{f.name}'")
            if f.name in seen:
                raise P4Error(f.loc, f"'{f.name}' is implemented twice")
            seen.add(f.name)
            if f.proto.type_params:
                raise P4Error(f.loc, f"'{f.name}' cannot have type parameters")
            params = f.proto.params
            if len(params) > len(proto.params) or not all(is_optional(p) for p in proto.params[len(params):]):
                raise P4Error(f.loc, f"{f.name} must take the parameters of {ext.name}.{proto.name}")
            self.env.calls.function_body(f, scope, {})
            for p, ap in zip(params, proto.params):
                want = self.env.calls.param_type(ap, bindings, [])
                if p.type != want or p.direction != ap.direction:  # p4c: at the instance ('ee'), which unifies
                    raise P4Error(find_after(decl.loc, rf"[)>]\s*({re.escape(decl.name)})\b", group=1),
                                  f"'{decl.name}': parameter '{p.name}' of {f.name} must be '{ap.direction} {want}'"
                                  f" (Method '{f.name}' does not have the expected type)")
            if f.type != self.env.decls.resolve_type(proto.return_type):
                raise P4Error(f.loc, f"{f.name} must return {proto.return_type.kind}")
        missing = [a.name for a in ext.abstracts if all(f.name != a.name for f in impls)]
        if missing and self.env.frontend:  # (in target mode only TNA's one-method externs get here)
            raise P4Error(decl.loc, f"{decl.name}: {missing[0]} abstract method not implemented")

    def _register_type(self, decl: ast.Instantiation, elem: Type) -> None:
        """Register cells: bit<W>, int<W>, bool, or a struct of those (a pair of halves)."""
        fields = list(elem.fields.values()) if isinstance(elem, HeaderT) and elem.kind == "struct" else [elem]
        if not all(isinstance(f, BitsT) or f is BOOL for f in fields):
            raise P4Error(decl.loc, f"Register<{elem}> is not supported by the built-in target: use bit<W>, "
                          "int<W> or a struct of them")

    # ---------------------------------------------------------------- the package
    def tna_program(self, main: ast.Instantiation) -> Any:
        if len(main.args) != 1:
            raise P4Error(main.loc, "a Switch of more than one Pipeline is not supported by the built-in target")
        arg = main.args[0]
        if isinstance(arg, ast.PathExpr):
            inst = self.env.globals.lookup(arg.name)
            if not isinstance(inst, ast.Instantiation):
                raise P4Error(arg.loc, f"'{arg.name}' is not a Pipeline instance")
            pipe_type, args = inst.type, inst.args
        elif isinstance(arg, ast.CtorCall):
            pipe_type, args = self.env.decls.resolve_type(arg.type_ref), arg.args
        else:
            raise P4Error(arg.loc, "the Switch's argument must be a Pipeline")
        if not (isinstance(pipe_type, BlockT) and pipe_type.decl.name == "Pipeline"):
            raise P4Error(arg.loc, "the Switch's argument must be a Pipeline(...)")
        package = pipe_type.decl
        if len(args) != len(TNA_BLOCKS):
            raise P4Error(arg.loc, f"Pipeline takes {len(TNA_BLOCKS)} arguments, got {len(args)}")
        blocks: dict[str, Any] = {}
        gress_types: dict[str, tuple[Type, Type]] = {}
        for role, a, param in zip(TNA_BLOCKS, args, package.params):
            if not isinstance(a, ast.CtorCall):
                raise P4Error(a.loc, f"Pipeline argument '{param.name}' must be a parser/control instantiation")
            decl = self.env.types.get(a.type_ref.name)
            if not isinstance(decl, (ast.ParserDecl, ast.ControlDecl)):
                raise P4Error(a.loc, f"'{a.type_ref.name}' is not a parser or control")
            decl = self.env.instances.block_instance(a.loc, decl, a.args, self.env.globals)
            template = self.env.types[param.type_ref.name]
            if not isinstance(decl, ast.ParserDecl if template.kind == "parser" else ast.ControlDecl):
                raise P4Error(a.loc, f"Pipeline argument '{param.name}' must be a {template.kind}")
            hm = self._tna_block(decl, template)
            gress = role.split("_")[0]
            if gress in gress_types and gress_types[gress] != hm:
                raise P4Error(decl.loc, f"{decl.name}'s header and metadata types differ from the other "
                              f"{gress} blocks'")
            gress_types[gress] = hm
            blocks[role] = decl
        (ih, im), (eh, em) = gress_types["ingress"], gress_types["egress"]
        std = HeaderT("standard_metadata_t", "struct")  # none in TNA; codegen's v1model paths see no fields
        # P4Runtime names as bf-p4c gives them for a one-pipeline program: not under the Pipeline
        # instance (Stratum's fabric-tna: FabricIngress.acl.acl); BF-RT's bfrt.json would add 'pipe.'.
        pipeline = Pipeline(main, blocks, ih, im, eh, em)
        return CheckedProgram(self.env.program, self.env.errors, std, pipeline, self.env.program.decls, "tna")

    def _tna_block(self, decl: ast.ParserDecl | ast.ControlDecl, template: ast.BlockTypeDecl) -> tuple[Type, Type]:
        """Check a block against Intel's template; returns its (H, M) types."""
        positions = {ep.type_ref.name: i for i, ep in enumerate(template.params)
                     if ep.type_ref.name in template.type_params}
        if len(decl.params) < max(positions.values()) + 1:
            raise P4Error(decl.loc, f"{decl.name} must take at least {max(positions.values()) + 1} parameters "
                          f"like TNA's {template.name}")
        h, m = (decl.params[positions[v]].type for v in template.type_params)
        for what, t in (("headers", h), ("metadata", m)):
            if not (isinstance(t, HeaderT) and t.kind == "struct"):
                raise P4Error(decl.loc, f"the {what} parameter of {decl.name} must be a struct, not {t}")
        saved, self.env.type_vars = self.env.type_vars, dict(zip(template.type_params, (h, m)))
        try:
            for p, ep in zip_longest(decl.params, template.params):
                if ep is None:
                    raise P4Error(p.loc, f"{decl.name} has more parameters than TNA's {template.name}")
                if p is None:
                    if not is_optional(ep):
                        raise P4Error(decl.loc, f"{decl.name} is missing parameter '{ep.name}' of {template.name}")
                    continue
                want = self.env.decls.resolve_type(ep.type_ref)
                if p.type != want or p.direction != ep.direction:
                    raise P4Error(p.loc, f"parameter '{p.name}' of {decl.name} must be "
                                  f"'{ep.direction} {want}' for TNA's {template.name}")
        finally:
            self.env.type_vars = saved
        return h, m

    # ---------------------------------------------------------------- method calls
    def tna_method(self, e: ast.Call, ext: ast.ExternDecl, m: str) -> None:
        """Load-time facts the executor needs about TNA extern calls."""
        if ext.name == "Hash" or (ext.name == "Checksum" and m in ("add", "subtract", "update")):
            self.env.externs.hash_data(e.args[0])
        if ext.name == "Checksum" and m == "update" and len(e.args) > 1 and e.args[1].value is None:
            raise P4Error(e.args[1].loc, "zeros_as_ones must be a compile-time constant")
